import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, managed, type ManagedServer } from '../../devkit/servers.js';

const execFileAsync = promisify(execFile);

/** A Redis Cluster of our own on loopback: masters with their replicas, each a {@link ManagedServer}. */
export interface RedisClusterHandle {
  /** Every node, masters first as `redis-cli --cluster create` assigned them. */
  readonly nodes: readonly ManagedServer[];
  /** `host:port,…` of every node: the value of `REDIS_CLUSTER_NODES`. */
  readonly nodesSetting: string;
  /** The replicas of a master, from its INFO replication. */
  replicasOf(master: ManagedServer): Promise<ManagedServer[]>;
  /** Hash slot of `key` (asks a live node). */
  slotOf(key: string): Promise<number>;
  /** The node serving `slot` as master now (asks a live node). */
  masterOf(slot: number): Promise<ManagedServer>;
  /** Polls until every live node says `cluster_state:ok`, every slot has a live master and every live replica is in sync. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes their data. */
  destroy(): Promise<void>;
}

const execRedisCli = (args: readonly string[], timeoutMs = 20_000) =>
  execFileAsync(process.env['REDIS_CLI_BIN'] ?? 'redis-cli', args, { timeout: timeoutMs }).then((r) => r.stdout);

/**
 * A Redis Cluster from Debian's redis-server: `masters` masters with `replicasPerMaster` replicas
 * each, on free loopback ports (client and cluster-bus ports both picked free), durable as
 * production (AOF everysec, noeviction), joined with `redis-cli --cluster create`. A short
 * `cluster-node-timeout` (`nodeTimeoutMs`) makes a failover take seconds, not the default 15 s.
 */
export async function startRedisCluster(options: { masters?: number; replicasPerMaster?: number; nodeTimeoutMs?: number } = {}): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 1;
  const total = masters * (1 + replicas);
  const nodes: ManagedServer[] = [];
  try {
    for (let i = 0; i < total; i++) {
      const port = await freePort();
      const busPort = await freePort();
      const dir = mkdtempSync(join(tmpdir(), 'fi-redis-cluster-'));
      const args = [
        '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
        '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2_000),
        // The other masters keep serving their slots while one fails over (the default refuses every slot): what docs/scaling.md recommends.
        '--cluster-require-full-coverage', 'no',
        '--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction',
        // A replica's first sync would otherwise wait 5 s for more replicas to share the transfer.
        '--repl-diskless-sync-delay', '0',
      ];
      const node = managed(port, `redis://127.0.0.1:${port}`, dir, () => spawn(process.env['REDIS_SERVER_BIN'] ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] }));
      nodes.push(node);
      await node.start();
    }
    await execRedisCli(['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'], 60_000);
  } catch (err) {
    await Promise.all(nodes.map((n) => n.destroy()));
    throw err;
  }

  const byPort = new Map(nodes.map((n) => [n.port, n]));
  /** `CLUSTER SLOTS` of the first node that answers: slot ranges and their master's port. */
  const slotMasters = async (): Promise<{ from: number; to: number; port: number }[]> => {
    for (const n of nodes) {
      const client = new Redis(n.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000, commandTimeout: 2_000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const slots = await client.cluster('SLOTS');
        return slots.map(([from, to, master]) => ({ from, to, port: master?.[1] ?? 0 }));
      } catch {
        // that node is down: ask the next
      } finally {
        client.disconnect();
      }
    }
    throw new Error('no cluster node answers CLUSTER SLOTS');
  };
  const handle: RedisClusterHandle = {
    nodes,
    nodesSetting: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    async replicasOf(master) {
      const info = await execRedisCli(['-p', String(master.port), 'info', 'replication'], 2_000);
      return [...info.matchAll(/slave\d+:ip=[^,]+,port=(\d+)/g)].map((m) => byPort.get(Number(m[1]))).filter((n): n is ManagedServer => n !== undefined);
    },
    async slotOf(key) {
      for (const n of nodes) {
        const out = await execRedisCli(['-p', String(n.port), 'cluster', 'keyslot', key], 2_000).catch(() => undefined);
        if (out !== undefined && /^\d+$/.test(out.trim())) return Number(out.trim());
      }
      throw new Error('no cluster node answers CLUSTER KEYSLOT');
    },
    async masterOf(slot) {
      const range = (await slotMasters()).find((r) => r.from <= slot && slot <= r.to);
      const node = range === undefined ? undefined : byPort.get(range.port);
      if (node === undefined) throw new Error(`no master serves slot ${slot}`);
      return node;
    },
    async waitHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(
          nodes.map(async (n) => {
            try {
              const info = await execRedisCli(['-p', String(n.port), 'cluster', 'info'], 2_000);
              const replication = await execRedisCli(['-p', String(n.port), 'info', 'replication'], 2_000);
              const synced = !/role:slave/.test(replication) || /master_link_status:up/.test(replication);
              return /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info) && synced;
            } catch {
              return undefined;
            }
          }),
        );
        const live = states.filter((s) => s !== undefined);
        if (live.length > 0 && live.every((s) => s === true)) {
          const ranges = await slotMasters().catch(() => []);
          const covered = ranges.reduce((sum, r) => sum + (r.to - r.from + 1), 0);
          // Every slot's master must be a live node (a killed one stays in the map until a replica takes over).
          const liveMasters = await Promise.all(ranges.map((r) => execRedisCli(['-p', String(r.port), 'ping'], 1_000).then((t) => t.trim() === 'PONG', () => false)));
          if (covered === 16384 && liveMasters.every(Boolean)) return;
        }
        if (Date.now() > deadline) throw new Error(`the Redis Cluster is not healthy after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async destroy() {
      await Promise.all(nodes.map((n) => n.destroy()));
    },
  };
  await handle.waitHealthy();
  return handle;
}
