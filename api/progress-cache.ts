/**
 * Progress counts of large datasets, computed at most so often. A progress call counts the
 * dataset's records and groups its responses (api/annotation-reads.ts): 22 ms at 2,000 records,
 * about 4.5 s and 5.4 s of store CPU at 1,000,000 (docs/annotation.md#progress-at-scale). A
 * dashboard polling it every few seconds would keep the store busy with nothing else. So a count
 * that took at least `cacheFromMs` is kept and served for `ttlFactor` times as long as it took
 * (at most `maxTtlMs`): the store spends at most about 1/`ttlFactor` of one core per dataset
 * watched, however many call and how often. Once that time is over, the next call gets the kept
 * counts and starts one new count in the background (stale while it revalidates), up to
 * `maxStaleFactor` times the TTL, after which a call waits for a fresh count. Counts that took
 * less than `cacheFromMs` (small datasets) are never kept: each call counts. Concurrent calls for
 * one dataset share one count. Each API process keeps its own.
 */
export interface CachedCount<T> {
  readonly value: T;
  /** When the count started (what it says is at least this recent). */
  readonly asOf: Date;
}

export interface ProgressCache<T> {
  /** The counts for `key` (a dataset), computed now or kept from a recent count. */
  get(key: string, compute: () => Promise<T>): Promise<CachedCount<T>>;
}

export interface ProgressCacheSettings {
  /** Counts that took less are not kept, ms. */
  readonly cacheFromMs: number;
  /** A kept count is served for this many times the time it took. */
  readonly ttlFactor: number;
  /** Longest a kept count is served as fresh, ms. */
  readonly maxTtlMs: number;
  /** Past this many TTLs a call waits for a new count instead of getting the kept one. */
  readonly maxStaleFactor: number;
  /** Datasets kept at most (the least recently counted goes first). */
  readonly maxEntries: number;
  readonly now?: () => number;
  /** Told when a background count fails (the kept one is served meanwhile). */
  readonly onRefreshError?: (key: string, err: unknown) => void;
}

/**
 * Counts quicker than a second are taken on every call: about 200,000 records on the stand-in, so
 * that a small dataset on a busy store is never answered with kept counts.
 */
export const PROGRESS_CACHE_DEFAULTS: ProgressCacheSettings = { cacheFromMs: 1_000, ttlFactor: 10, maxTtlMs: 60_000, maxStaleFactor: 3, maxEntries: 1_000 };

interface Entry<T> {
  value: T;
  asOf: number;
  tookMs: number;
}

export function createProgressCache<T>(settings: ProgressCacheSettings = PROGRESS_CACHE_DEFAULTS): ProgressCache<T> {
  const now = settings.now ?? Date.now;
  const kept = new Map<string, Entry<T>>();
  const counting = new Map<string, Promise<Entry<T>>>();
  const ttl = (e: Entry<T>) => Math.min(settings.maxTtlMs, e.tookMs * settings.ttlFactor);

  function count(key: string, compute: () => Promise<T>): Promise<Entry<T>> {
    const running = counting.get(key);
    if (running !== undefined) return running;
    const started = now();
    const p = compute()
      .then((value) => {
        const entry = { value, asOf: started, tookMs: now() - started };
        kept.delete(key);
        if (entry.tookMs >= settings.cacheFromMs) {
          kept.set(key, entry);
          if (kept.size > settings.maxEntries) kept.delete(kept.keys().next().value as string);
        }
        return entry;
      })
      .finally(() => counting.delete(key));
    counting.set(key, p);
    return p;
  }

  const answer = (e: Entry<T>): CachedCount<T> => ({ value: e.value, asOf: new Date(e.asOf) });

  return {
    async get(key, compute) {
      const e = kept.get(key);
      if (e !== undefined) {
        const age = now() - e.asOf - e.tookMs;
        if (age < ttl(e)) return answer(e);
        if (age < ttl(e) * settings.maxStaleFactor) {
          count(key, compute).catch((err: unknown) => settings.onRefreshError?.(key, err));
          return answer(e);
        }
      }
      return answer(await count(key, compute));
    },
  };
}
