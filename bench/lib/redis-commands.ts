import type { Redis } from 'ioredis';

/** `usec` of each command in Redis's INFO commandstats (the time Redis spent running it, scripts included in `evalsha`). */
export async function redisCommandUsec(redis: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const text = await redis.info('commandstats').catch(() => '');
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** Redis µs per write by command over a run, largest first (where Redis's CPU per write goes). */
export function commandsPerWrite(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>, writes: number): Record<string, number> {
  if (writes <= 0) return {};
  const rows = [...after].map(([c, us]) => [c, (us - (before.get(c) ?? 0)) / writes] as const).filter(([, v]) => v >= 0.05);
  return Object.fromEntries(rows.sort((a, b) => b[1] - a[1]));
}
