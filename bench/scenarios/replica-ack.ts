// The cost of closing the "up to ~1 s of acknowledged writes" window: accept rate of one API
// process with REDIS_MIN_REPLICAS_ACK=1 (WAIT 1), and with the master on AOF `appendfsync always`,
// against the shipped setting (AOF everysec, WAIT 0), on one Redis master with one replica, in
// rotating rounds.
//
//   node --import tsx bench/scenarios/replica-ack.ts [--seconds 10] [--rounds 2] [--connections 64]
//
// The API runs as production runs it (its own process, `api/main.ts`); autocannon sends
// POST /feedback-record bodies of the usual mix. No worker runs: this measures what the API can
// acknowledge, and the queue is emptied between rounds.
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { spawnService, type ServiceProcess } from '../../devkit/processes.js';
import { freePort, startFerretDb, startRedis, type ManagedServer } from '../../devkit/servers.js';
import { recordBody, runLoad, type LoadResult } from '../lib/load.js';
import { fmt, median } from '../lib/report.js';

const KEY = { name: 'bench', secret: 'bench-replica-ack-secret-0123' } as const;

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '10' }, rounds: { type: 'string', default: '2' }, connections: { type: 'string', default: '64' } },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const connections = Number(args.connections);

async function startReplica(master: ManagedServer): Promise<{ server: ManagedServer; client: Redis }> {
  const server = await startRedis({ durable: true });
  const client = new Redis(server.port, '127.0.0.1');
  await client.call('REPLICAOF', '127.0.0.1', String(master.port));
  for (let i = 0; i < 200; i++) {
    if (/master_link_status:up/.test(await client.info('replication'))) return { server, client };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the replica did not sync');
}

async function startApi(env: Record<string, string>): Promise<{ proc: ServiceProcess; url: string }> {
  const port = await freePort();
  const proc = spawnService('api', 'api/main.ts', { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' });
  // LOG_LEVEL warn hides 'api listening': wait for the port instead.
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    const up = await fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    if (up) return { proc, url };
    if (!proc.alive()) throw new Error(`the API exited: ${proc.text().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the API did not start');
}

const master = await startRedis({ durable: true });
const replica = await startReplica(master);
const mongo = await startFerretDb();
const masterClient = new Redis(master.port, '127.0.0.1');
/** everysec: the shipped setting; wait1: REDIS_MIN_REPLICAS_ACK=1; always: appendfsync always on the master. */
const VARIANTS = ['everysec', 'wait1', 'always'] as const;
type Variant = (typeof VARIANTS)[number];
const results: Record<Variant, LoadResult[]> = { everysec: [], wait1: [], always: [] };
const load: number[] = [];
try {
  const requests = Array.from({ length: 300 }, (_, i) => ({
    method: 'POST' as const,
    path: '/feedback-record',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${KEY.secret}` },
    body: recordBody('ds_bench', i),
  }));
  for (let round = 0; round < rounds; round++) {
    for (const variant of VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!)) {
      await masterClient.config('SET', 'appendfsync', variant === 'always' ? 'always' : 'everysec');
      const queue = `replica-ack-${randomBytes(3).toString('hex')}`;
      const api = await startApi({
        REDIS_URL: master.url,
        MONGODB_URI: `${mongo.url}/bench_replica_ack`,
        QUEUE_NAME: queue,
        API_KEYS: `${KEY.name}:${KEY.secret}`,
        ID_SIGNING_SECRETS: 'bench-replica-ack-id-secret-0123456789',
        REDIS_MIN_REPLICAS_ACK: variant === 'wait1' ? '1' : '0',
        BACKLOG_MAX_JOBS: '100000000',
      });
      try {
        load.push(loadavg()[0]!);
        const r = await runLoad({ url: api.url, connections, requests, durationS: seconds, maxS: seconds + 30 }).done;
        results[variant].push(r);
        process.stderr.write(`round ${round + 1} ${variant}: ${fmt(r.rps)} writes/s accepted, p99 ${fmt(r.latencyMs.p99)} ms, non-2xx ${r.non2xx} ${JSON.stringify(r.statusCodes)}\n`);
      } finally {
        await api.proc.kill();
        await masterClient.eval("for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0", 0, `*${queue}*`);
      }
    }
  }
} finally {
  masterClient.disconnect();
  replica.client.disconnect();
  await Promise.all([replica.server.destroy(), master.destroy(), mongo.destroy()]);
}
const rate = (v: Variant) => median(results[v].map((r) => r.rps)) ?? 0;
const p99 = (v: Variant) => median(results[v].map((r) => r.latencyMs.p99));
const ratio = (v: Variant) => Math.round((rate(v) / (rate('everysec') || 1)) * 100) / 100;
process.stdout.write(
  `${JSON.stringify({
    scenario: 'replica-ack',
    command: `node --import tsx bench/scenarios/replica-ack.ts --seconds ${seconds} --rounds ${rounds} --connections ${connections}`,
    cores: cpus().length,
    load_avg_1m_during: load.map((x) => Math.round(x * 100) / 100),
    accepted_per_s: Object.fromEntries(VARIANTS.map((v) => [v, results[v].map((r) => Math.round(r.rps))])),
    p99_ms: Object.fromEntries(VARIANTS.map((v) => [v, p99(v)])),
    non2xx: Object.fromEntries(VARIANTS.map((v) => [v, results[v].map((r) => r.non2xx)])),
    ratio_wait1_over_everysec: ratio('wait1'),
    ratio_always_over_everysec: ratio('always'),
  })}\n`,
);
