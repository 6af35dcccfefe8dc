/** One scrape of a Prometheus text endpoint: series (name plus label text) to value. */
export type Scrape = ReadonlyMap<string, number>;

export async function scrape(url: string, timeoutMs = 5_000): Promise<Scrape> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return parseProm(await res.text());
}

function parseProm(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    if (space <= 0) continue;
    const value = Number(line.slice(space + 1));
    if (!Number.isNaN(value) || line.endsWith('NaN')) out.set(line.slice(0, space), value);
  }
  return out;
}

function labelsOf(series: string): Record<string, string> {
  const open = series.indexOf('{');
  const labels: Record<string, string> = {};
  if (open < 0) return labels;
  for (const m of series.slice(open + 1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return labels;
}

function nameOf(series: string): string {
  const open = series.indexOf('{');
  return open < 0 ? series : series.slice(0, open);
}

/** Sum of every series of `name` whose labels include `where`. */
export function sumOf(s: Scrape, name: string, where: Record<string, string> = {}): number {
  let total = 0;
  for (const [series, value] of s) {
    if (nameOf(series) !== name) continue;
    const labels = labelsOf(series);
    if (Object.entries(where).every(([k, v]) => labels[k] === v)) total += value;
  }
  return total;
}

/** Cumulative buckets of histogram `name` (labels other than `le` summed), sorted by bound. */
function bucketsOf(s: Scrape, name: string): { le: number; count: number }[] {
  const byLe = new Map<number, number>();
  for (const [series, value] of s) {
    if (nameOf(series) !== `${name}_bucket`) continue;
    const le = labelsOf(series)['le'];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    byLe.set(bound, (byLe.get(bound) ?? 0) + value);
  }
  return [...byLe.entries()].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
}

/** Buckets observed between two scrapes. */
export function bucketsDiff(before: Scrape, after: Scrape, name: string): { le: number; count: number }[] {
  const b = new Map(bucketsOf(before, name).map((x) => [x.le, x.count]));
  return bucketsOf(after, name).map((x) => ({ le: x.le, count: x.count - (b.get(x.le) ?? 0) }));
}

/**
 * The q-quantile of cumulative buckets, interpolated linearly inside its bucket (what PromQL's
 * histogram_quantile does). Undefined when empty; the last finite bound when it falls in +Inf.
 */
export function bucketQuantile(buckets: readonly { le: number; count: number }[], q: number): number | undefined {
  const total = buckets.at(-1)?.count ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (!Number.isFinite(b.le)) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket <= 0 ? b.le : prevLe + ((b.le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}
