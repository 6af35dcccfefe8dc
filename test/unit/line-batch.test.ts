import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { LineBatch, type LineSink } from '../../shared/line-batch.js';
import { cachedIsoTime } from '../../shared/logger.js';

/*
 * The API's log destination (shared/line-batch.ts, shared/logger.ts): lines reach standard output
 * whole, in order, in batches, within the flush period, and none is lost when the process exits;
 * the cached timestamp is pino's isoTime, the same text, for each millisecond.
 */

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

/** A sink that records what it was handed (the batching is pure logic; the file descriptor part is sonic-boom's). */
function recordingSink(): LineSink & { readonly writes: string[]; syncs: number } {
  const writes: string[] = [];
  return {
    writes,
    syncs: 0,
    write(data: string) {
      writes.push(data);
    },
    flushSync() {
      this.syncs++;
    },
  };
}

async function waitFor(check: () => boolean, what: string, boundMs = 5000): Promise<void> {
  const until = Date.now() + boundMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out after ${boundMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('LineBatch (shared/line-batch.ts)', () => {
  it('hands lines to the sink once minChars wait, joined in their order', () => {
    const sink = recordingSink();
    const batch = new LineBatch(() => sink, { minChars: 30, flushMs: 60_000 });
    batch.write('a'.repeat(10) + '\n');
    batch.write('b'.repeat(10) + '\n');
    expect(sink.writes).to.deep.equal([]);
    batch.write('c'.repeat(10) + '\n');
    expect(sink.writes).to.deep.equal([`${'a'.repeat(10)}\n${'b'.repeat(10)}\n${'c'.repeat(10)}\n`]);
    batch.write('d\n');
    expect(sink.writes).to.have.length(1);
  });

  it('hands a quiet batch over within flushMs', async () => {
    const sink = recordingSink();
    const batch = new LineBatch(() => sink, { minChars: 4096, flushMs: 20 });
    batch.write('one\n');
    batch.write('two\n');
    await waitFor(() => sink.writes.length > 0, 'the periodic flush');
    expect(sink.writes).to.deep.equal(['one\ntwo\n']);
  });

  it('flushSync hands over what waits and flushes the sink', () => {
    const sink = recordingSink();
    const batch = new LineBatch(() => sink, { minChars: 4096, flushMs: 60_000 });
    batch.write('x\n');
    batch.flushSync();
    expect(sink.writes).to.deep.equal(['x\n']);
    expect(sink.syncs).to.equal(1);
    batch.flushSync();
    expect(sink.writes).to.have.length(1);
  });

  it('loses no line when the process exits or runs out of work (a real process writing to a pipe)', async () => {
    // 500 request-sized lines, far from a full batch at the end, then either process.exit() at
    // once or nothing left to do: every line must be on stdout, in order.
    const script = `
      import { asyncStdout, createLogger } from './shared/logger.ts';
      const log = createLogger({ level: 'info', name: 'api', destination: asyncStdout() });
      for (let i = 0; i < 500; i++) log.info({ n: i, request_id: 'r' + i }, 'request');
      if (process.argv.includes('exit')) process.exit(0);
    `;
    for (const how of ['exit', 'drain']) {
      const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, how], { cwd: root, maxBuffer: 1 << 24 });
      const lines = stdout.split('\n').filter((l) => l !== '');
      expect(lines, how).to.have.length(500);
      expect(lines.map((l) => (JSON.parse(l) as { n: number }).n), how).to.deep.equal([...Array(500).keys()]);
    }
  });
});

describe('cachedIsoTime (shared/logger.ts)', () => {
  it("is pino's isoTime text, made again whenever the millisecond changes", () => {
    let now = Date.UTC(2026, 10, 27, 9, 12, 13, 456);
    const time = cachedIsoTime(() => now);
    const pinoText = (ms: number) => {
      const real = Date.now;
      Date.now = () => ms;
      try {
        return pino.stdTimeFunctions.isoTime();
      } finally {
        Date.now = real;
      }
    };
    expect(time()).to.equal(',"time":"2026-11-27T09:12:13.456Z"');
    expect(time()).to.equal(pinoText(now));
    now += 1;
    expect(time()).to.equal(',"time":"2026-11-27T09:12:13.457Z"');
    now += 86_400_000;
    expect(time()).to.equal(pinoText(now));
  });
});
