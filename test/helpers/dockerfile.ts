import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, posix } from 'node:path';

/** One instruction of a Dockerfile, continuation lines joined. */
export interface DockerInstruction {
  readonly keyword: string;
  readonly args: string;
  /** 1-based line where it starts, for messages. */
  readonly line: number;
}

/** Instructions in order; comments and blank lines dropped, `\` continuations joined. */
export function parseDockerfile(text: string): DockerInstruction[] {
  const out: DockerInstruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const continued = line.endsWith('\\');
    const part = continued ? line.slice(0, -1).trim() : line;
    pending = pending === undefined ? { text: part, line: index + 1 } : { text: `${pending.text} ${part}`, line: pending.line };
    if (continued) return;
    const m = /^(\S+)\s*(.*)$/.exec(pending.text)!;
    out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!, line: pending.line });
    pending = undefined;
  });
  return out;
}

/**
 * Removes from `context` what its .dockerignore keeps out of a Docker build context, so that a
 * COPY of an ignored path fails here as it would in Docker. Literal paths only (what this
 * project's file holds); a pattern with wildcards or `!` throws.
 */
export function applyDockerignore(context: string): string[] {
  const file = join(context, '.dockerignore');
  if (!existsSync(file)) return [];
  const ignored: string[] = [];
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (/[*?[\]!]/.test(line)) throw new Error(`.dockerignore: the pattern ${line} is not understood; teach test/helpers/dockerfile.ts`);
    const path = posix.normalize(line.replace(/^\/+/, '').replace(/\/+$/, ''));
    if (path.startsWith('..') || path === '.') throw new Error(`.dockerignore: ${line} is outside the context`);
    rmSync(join(context, path), { recursive: true, force: true });
    ignored.push(path);
  }
  return ignored;
}

/** One stage as the emulation left it: its filesystem is `dir`, standing for the image's WORKDIR. */
export interface EmulatedStage {
  readonly name: string;
  readonly image: string;
  /** Where the stage's WORKDIR is on this machine. */
  readonly dir: string;
  /** ENV of the stage. */
  readonly env: Readonly<Record<string, string>>;
  /** The exec form of CMD, when the stage has one. */
  readonly cmd: readonly string[] | undefined;
  /** USER, recorded, not emulated (everything here runs as the test's user). */
  readonly user: string | undefined;
  /** The shell lines of its RUN instructions, in order. */
  readonly runs: readonly string[];
}

interface MutableStage {
  name: string;
  image: string;
  root: string;
  workdir: string | undefined;
  env: Record<string, string>;
  cmd: string[] | undefined;
  user: string | undefined;
  runs: string[];
}

export interface EmulateOptions {
  /** The build context (a fresh checkout). */
  readonly context: string;
  /** An empty directory that receives one directory per stage. */
  readonly root: string;
  /** Environment of RUN lines, below the stage's ENV (PATH, HOME, the npm cache…). */
  readonly env: Readonly<Record<string, string>>;
  /** Bound of each RUN line, ms. */
  readonly runTimeoutMs: number;
}

/**
 * Builds a Dockerfile without Docker: each stage's WORKDIR is a directory of its own, COPY copies
 * from the context (or from an earlier stage with --from) and RUN runs its shell line there, on
 * this machine's Node. Only what this project's Dockerfile uses is understood; anything else
 * throws, so that a Dockerfile this cannot emulate fails the test instead of being half-tested.
 */
export async function emulateDockerBuild(dockerfile: string, options: EmulateOptions): Promise<EmulatedStage[]> {
  const stages: MutableStage[] = [];
  const fail = (ins: DockerInstruction, why: string): never => {
    throw new Error(`Dockerfile line ${ins.line} (${ins.keyword} ${ins.args}): ${why}; teach test/helpers/dockerfile.ts`);
  };
  const current = (ins: DockerInstruction): MutableStage => stages.at(-1) ?? fail(ins, 'before any FROM');
  /** Where a path of the stage's image is on this machine: only paths under its WORKDIR exist here. */
  const hostPath = (stage: MutableStage, ins: DockerInstruction, path: string): string => {
    if (stage.workdir === undefined) return fail(ins, 'a path before WORKDIR');
    const abs = posix.resolve(stage.workdir, path);
    const rel = posix.relative(stage.workdir, abs);
    if (rel.startsWith('..')) return fail(ins, `${path} is outside WORKDIR ${stage.workdir}`);
    return join(stage.root, rel);
  };
  for (const ins of parseDockerfile(dockerfile)) {
    const words = ins.args.split(/\s+/).filter((w) => w !== '');
    switch (ins.keyword) {
      case 'FROM': {
        const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args) ?? fail(ins, 'expected FROM image [AS name]');
        const name = m[2] ?? String(stages.length);
        const root = join(options.root, `stage-${stages.length}-${name}`);
        mkdirSync(root, { recursive: true });
        stages.push({ name, image: m[1]!, root, workdir: undefined, env: {}, cmd: undefined, user: undefined, runs: [] });
        break;
      }
      case 'WORKDIR': {
        const stage = current(ins);
        if (stage.workdir !== undefined || !ins.args.startsWith('/')) fail(ins, 'one absolute WORKDIR per stage is understood');
        stage.workdir = ins.args;
        break;
      }
      case 'ENV': {
        const stage = current(ins);
        for (const word of words) {
          const m = /^([A-Za-z_][A-Za-z0-9_]*)=([^"'$\\]*)$/.exec(word) ?? fail(ins, 'only unquoted KEY=value pairs are understood');
          stage.env[m[1]!] = m[2]!;
        }
        break;
      }
      case 'COPY': {
        const stage = current(ins);
        if (ins.args.startsWith('[')) fail(ins, 'the JSON form of COPY');
        const flags = words.filter((w) => w.startsWith('--'));
        const paths = words.filter((w) => !w.startsWith('--'));
        let from: MutableStage | undefined;
        for (const flag of flags) {
          const m = /^--from=(.+)$/.exec(flag) ?? fail(ins, `the flag ${flag}`);
          from = stages.find((s) => s.name === m[1]) ?? fail(ins, `no earlier stage named ${m[1]}`);
        }
        if (paths.length < 2) fail(ins, 'expected COPY src... dest');
        const dest = paths.at(-1)!;
        const sources = paths.slice(0, -1);
        const intoDir = dest.endsWith('/') || sources.length > 1;
        for (const source of sources) {
          if (/[*?[]/.test(source)) fail(ins, 'wildcards');
          const src = from === undefined ? join(options.context, posix.normalize(source)) : hostPath(from, ins, source);
          if (from === undefined && posix.normalize(source).startsWith('..')) fail(ins, `${source} is outside the build context`);
          if (!existsSync(src)) fail(ins, `${source} does not exist ${from === undefined ? 'in the build context (a fresh checkout of HEAD)' : `in stage ${from.name}`}`);
          const target = hostPath(stage, ins, dest);
          if (statSync(src).isDirectory()) {
            // As Docker does: a directory's contents go into dest. Symlinks (node_modules/.bin) stay links.
            cpSync(src, target, { recursive: true, verbatimSymlinks: true });
          } else {
            const file = intoDir ? join(target, basename(src)) : target;
            mkdirSync(dirname(file), { recursive: true });
            cpSync(src, file);
          }
        }
        break;
      }
      case 'RUN': {
        const stage = current(ins);
        if (ins.args.startsWith('[')) fail(ins, 'the JSON form of RUN');
        const cwd = hostPath(stage, ins, '.');
        mkdirSync(cwd, { recursive: true });
        stage.runs.push(ins.args);
        await runShell(ins.args, { cwd, env: { ...options.env, ...stage.env }, timeoutMs: options.runTimeoutMs });
        break;
      }
      case 'USER':
        current(ins).user = ins.args;
        break;
      case 'CMD': {
        let cmd: unknown;
        try {
          cmd = JSON.parse(ins.args);
        } catch {
          cmd = undefined;
        }
        if (!Array.isArray(cmd) || !cmd.every((c) => typeof c === 'string')) return fail(ins, 'only the exec form of CMD is understood');
        current(ins).cmd = cmd;
        break;
      }
      default:
        fail(ins, 'an instruction this emulation does not know');
    }
  }
  return stages.map((s) => ({
    name: s.name,
    image: s.image,
    dir: s.root,
    env: Object.freeze({ ...s.env }),
    cmd: s.cmd === undefined ? undefined : Object.freeze([...s.cmd]),
    user: s.user,
    runs: Object.freeze([...s.runs]),
  }));
}

/**
 * `sh -c line` in its own process group, killed whole when it outlives `timeoutMs`. Rejects with
 * the line's output when it fails.
 */
export function runShell(line: string, options: { cwd: string; env: Readonly<Record<string, string>>; timeoutMs: number }): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', line], { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, options.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`\`${line}\` in ${options.cwd} ${timedOut ? `outlived ${options.timeoutMs} ms` : `failed (${signal ?? code})`}:\n${output.slice(-4000)}`));
    });
  });
}
