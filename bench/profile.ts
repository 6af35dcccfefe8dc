// Summarises a V8 .cpuprofile (from `npm run bench -- --cpu-prof`): where a server's CPU time
// goes, by package or file and by function, as self time.
//   node --import tsx bench/profile.ts bench/results/tmp/prof-<date>/web/*.cpuprofile [--top 30]
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** `node_modules/<pkg>`, a project file, `node:<module>`, or a V8 pseudo-frame like (garbage collector). */
function groupOf(frame: CallFrame): string {
  const url = frame.url;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm !== null) return nm[1]!;
  if (url.startsWith('node:')) return url;
  const own = /\/(api|worker|shared|bench|dist)\/(.*)$/.exec(url);
  return own === null ? url : `${own[1]}/${own[2]}`;
}

function summarise(path: string, top: number): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idle = [...selfUs.entries()].filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)').reduce((a, [, v]) => a + v, 0);
  const busy = total - idle;
  const groups = new Map<string, number>();
  const fns = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (node === undefined || node.callFrame.functionName === '(idle)') continue;
    const g = groupOf(node.callFrame);
    groups.set(g, (groups.get(g) ?? 0) + us);
    const fn = `${node.callFrame.functionName || '(anonymous)'}  ${g}:${node.callFrame.lineNumber + 1}`;
    fns.set(fn, (fns.get(fn) ?? 0) + us);
  }
  const pct = (us: number) => `${((us / busy) * 100).toFixed(1).padStart(5)}%`;
  const lines: string[] = [];
  lines.push(`${path}: ${(total / 1e6).toFixed(1)} s profiled, ${(busy / 1e6).toFixed(1)} s busy (${((busy / total) * 100).toFixed(0)}%)`);
  lines.push('', 'self time by package / file (share of busy time):');
  for (const [g, us] of [...groups.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us)}  ${g}`);
  lines.push('', 'self time by function:');
  for (const [f, us] of [...fns.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(us)}  ${f}`);
  return lines.join('\n');
}

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args[topAt + 1] ?? 30) : 30;
const files = args.filter((a, i) => a !== '--top' && (topAt < 0 || i !== topAt + 1));
if (files.length === 0) {
  process.stderr.write('usage: node --import tsx bench/profile.ts <file.cpuprofile>… [--top N]\n');
  process.exit(2);
}
for (const f of files) process.stdout.write(`${summarise(f, top)}\n\n`);
