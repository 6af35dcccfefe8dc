/**
 * Group commit: items submitted while a batch is being committed gather and leave together in
 * the next batch. Under light load an item leaves alone at once (one event-loop turn of
 * coalescing); under load batches fill up to their limits, so the cost of a commit is paid per
 * batch instead of per item. The API uses it to put many writes in one queued job, the worker to
 * store the writes of many jobs in one round of store commands.
 */
interface GroupCommitOptions<T, R> {
  /** Commits one batch; resolves with one result per item, in order, or rejects for all of them. */
  commit(batch: readonly T[]): Promise<readonly R[]>;
  /** Most items per batch. */
  readonly maxItems: number;
  /** Most total weight per batch; an item heavier than this leaves alone. Default: no limit. */
  readonly maxWeight?: number;
  /** Weight of an item (bytes, writes). Default 1. */
  readonly weight?: (item: T) => number;
  /** Most batches being committed at once. */
  readonly maxInFlight: number;
}

interface GroupCommit<T, R> {
  /**
   * Queues `item` for the next batch. With `deadline` (ms since the epoch), an item still waiting
   * for a batch then is taken out and rejected with `expired()`: it was never committed. While
   * commits keep succeeding the wait goes on: an item expires only once its window (`deadline`
   * less the time of its submit) has passed with no commit done, so that a wait behind other
   * items (a large batch call) that the committer is working through is no failure, and a
   * committer that stopped answering still fails every waiting item within its window.
   */
  submit(item: T, options?: { readonly deadline?: number; readonly expired?: () => Error }): Promise<R>;
  /** Items and weight waiting for a batch (not those being committed). */
  waiting(): { readonly items: number; readonly weight: number };
  /**
   * Takes every item still waiting for a batch out of the queue, unsent, with the settlers of
   * their `submit` promises: the caller sends them elsewhere and settles them (the API moves
   * writes off a Redis shard that stopped answering).
   */
  takeWaiting(): { readonly item: T; readonly resolve: (result: R) => void; readonly reject: (err: unknown) => void }[];
  /** Resolves once nothing waits and nothing is being committed. */
  drain(): Promise<void>;
}

interface Waiting<T, R> {
  readonly item: T;
  readonly weight: number;
  readonly deadline: number;
  /** How long it may wait with no commit done, ms (`deadline` less its submit time). */
  readonly window: number;
  readonly expired: (() => Error) | undefined;
  readonly resolve: (result: R) => void;
  readonly reject: (err: unknown) => void;
}

export function createGroupCommit<T, R>(options: GroupCommitOptions<T, R>): GroupCommit<T, R> {
  const { commit, maxItems, maxInFlight } = options;
  const maxWeight = options.maxWeight ?? Number.POSITIVE_INFINITY;
  const weigh = options.weight ?? (() => 1);
  // A FIFO with a moving head: shifting a long array per batch would copy it each time.
  let queue: Waiting<T, R>[] = [];
  let head = 0;
  let waitingWeight = 0;
  let inFlight = 0;
  /** When a commit last succeeded (ms since the epoch). */
  let progressAt = 0;
  /** When `w` expires: its deadline, or its window after the last commit done, whichever is later. */
  const expiresAt = (w: Waiting<T, R>) => Math.max(w.deadline, progressAt + w.window);
  let scheduled = false;
  let expiryTimer: NodeJS.Timeout | undefined;
  const idle: (() => void)[] = [];

  const waitingCount = () => queue.length - head;

  function take(): Waiting<T, R>[] {
    const batch: Waiting<T, R>[] = [];
    let weight = 0;
    while (head < queue.length && batch.length < maxItems) {
      const next = queue[head]!;
      if (batch.length > 0 && weight + next.weight > maxWeight) break;
      batch.push(next);
      weight += next.weight;
      head++;
    }
    waitingWeight -= weight;
    if (head === queue.length) {
      queue = [];
      head = 0;
    }
    return batch;
  }

  function run(batch: Waiting<T, R>[]): void {
    inFlight++;
    let results: Promise<readonly R[]>;
    try {
      results = commit(batch.map((w) => w.item));
    } catch (err) {
      results = Promise.reject(err);
    }
    results
      .then(
        (out) => {
          if (out.length !== batch.length) throw new Error(`group commit returned ${out.length} results for ${batch.length} items`);
          progressAt = Date.now();
          batch.forEach((w, i) => w.resolve(out[i]!));
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      )
      .catch((err: unknown) => {
        for (const w of batch) w.reject(err);
      })
      .finally(() => {
        inFlight--;
        if (waitingCount() > 0) schedule();
        else if (inFlight === 0) for (const done of idle.splice(0)) done();
      });
  }

  function pump(): void {
    scheduled = false;
    expire();
    while (waitingCount() > 0 && inFlight < maxInFlight) run(take());
  }

  /** Rejects the items at the head that have expired (the queue is in deadline order, and windows are alike). */
  function expire(): void {
    const now = Date.now();
    while (head < queue.length && expiresAt(queue[head]!) <= now) {
      const w = queue[head++]!;
      waitingWeight -= w.weight;
      w.reject(w.expired?.() ?? new Error('expired before it was committed'));
    }
    if (head === queue.length) {
      queue = [];
      head = 0;
      if (inFlight === 0) for (const done of idle.splice(0)) done();
    }
    armExpiry();
  }

  function armExpiry(): void {
    clearTimeout(expiryTimer);
    expiryTimer = undefined;
    const first = queue[head];
    if (first === undefined || !Number.isFinite(first.deadline)) return;
    expiryTimer = setTimeout(expire, Math.max(0, expiresAt(first) - Date.now()));
    expiryTimer.unref();
  }

  function schedule(): void {
    if (scheduled || inFlight >= maxInFlight) return;
    scheduled = true;
    // setImmediate lets the items submitted in this turn of the event loop join the batch.
    setImmediate(pump);
  }

  return {
    submit(item, opts = {}) {
      return new Promise<R>((resolve, reject) => {
        const weight = weigh(item);
        const deadline = opts.deadline ?? Number.POSITIVE_INFINITY;
        const window = Math.max(0, deadline - Date.now());
        const last = queue[queue.length - 1];
        // Keep the queue in deadline order so that expiry only ever looks at the head.
        const ordered = last === undefined || last.deadline <= deadline ? deadline : last.deadline;
        queue.push({ item, weight, deadline: ordered, window, expired: opts.expired, resolve, reject });
        waitingWeight += weight;
        if (waitingCount() === 1) armExpiry();
        schedule();
      });
    },
    waiting: () => ({ items: waitingCount(), weight: waitingWeight }),
    takeWaiting() {
      const taken = queue.slice(head).map(({ item, resolve, reject }) => ({ item, resolve, reject }));
      queue = [];
      head = 0;
      waitingWeight = 0;
      armExpiry();
      if (inFlight === 0) for (const done of idle.splice(0)) done();
      return taken;
    },
    drain() {
      if (waitingCount() === 0 && inFlight === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        idle.push(resolve);
        schedule();
      });
    },
  };
}
