import assert from 'node:assert/strict';
import { OVERSIZE_TEXT } from '../helpers/oversize.js';
import { isDeepStrictEqual } from 'node:util';
import { Agent } from 'node:http';
import type { Db } from 'mongodb';
import { createIdMinter } from '../../shared/ids.js';
import { OUTCOME_UNKNOWN_MESSAGE } from '../../api/enqueuer.js';
import { COLLECTIONS } from '../../shared/mongo.js';
import { ID_SECRET, LEDGER_KEY } from './cluster.js';
import { NoAnswer, errorShape, send, type HttpAnswer } from './http.js';

/**
 * What became of a request, as far as the client can know:
 * - `acked`: 200 with ids. The write must be stored exactly once.
 * - `refused`: a definite non-200 answer (4xx, 503). Nothing may be stored.
 * - `unsent`: the connection was refused; the server never saw the request. Nothing may be stored.
 * - `unknown`: sent, but no answer (the process died, the connection broke), or a 503 saying the
 *   job may have reached Redis (a timeout, a connection lost mid-command). Stored once or not at all.
 */
type Outcome = 'pending' | 'acked' | 'refused' | 'unsent' | 'unknown';

type ResponseStatus = 'draft' | 'submitted' | 'discarded';

/** A (record, annotator) pair: one response document, updated in the order the API accepted. */
interface Pair {
  readonly recordId: string;
  readonly userId: string;
  /** Versions in the order they were sent; never two in flight at once, so send order = acceptance order. */
  readonly versions: Entry[];
  busy: boolean;
}

interface Entry {
  readonly n: number;
  /** Unique per request: sent as X-Request-Id, stored in the record's external_id / the response values. */
  readonly tag: string;
  readonly kind: 'record' | 'response';
  readonly body: Record<string, any>;
  /** The annotator of the (first) response. */
  readonly userId: string;
  /** A write the store refuses for good (too large); it must be dead-lettered, not stored. */
  readonly poison: boolean;
  readonly target: string;
  readonly startedAt: number;
  endedAt: number | undefined;
  outcome: Outcome;
  status: number | undefined;
  code: string | undefined;
  /** Known for responses from the start; for records once acked. */
  recordId: string | undefined;
  responseId: string | undefined;
  /** Milliseconds from send to answer. */
  ms: number | undefined;
}

interface LoadOptions {
  /** The API base URLs to spread requests over, read before every request (they may change). */
  readonly targets: () => readonly string[];
  /** Most requests this run sends. */
  readonly total: number;
  readonly concurrency: number;
  /** Share of requests that are POST /feedback-response (to records already acknowledged). */
  readonly responseShare?: number;
  /**
   * Share of those responses that update an existing (record, annotator) pair rather than open a
   * new one. Default 0.7: updates are what annotation tools mostly send.
   */
  readonly updateShare?: number;
  /** Requests started per second at most; unbounded when undefined. */
  readonly ratePerSecond?: number;
  /** Every `poisonEvery`-th request carries a document the store refuses (the cluster's API takes bodies that large). */
  readonly poisonEvery?: number;
  /** Per-request client timeout, ms. */
  readonly timeoutMs?: number;
}

interface LoadRun {
  /** Resolves when every request of the run has its outcome. */
  readonly done: Promise<void>;
  /** Starts no new request; those in flight finish. */
  stop(): void;
}

export interface LedgerReport {
  readonly requests: number;
  readonly outcomes: Readonly<Record<Outcome, number>>;
  /** Acknowledged writes (records with their first response, and responses). */
  readonly acknowledged: number;
  /** Acknowledged writes found stored as sent (or superseded by a later accepted update). */
  readonly stored: number;
  /** Acknowledged poison writes found in feedback_dead_letters with reason store_rejected. */
  readonly deadLettered: number;
  /** Documents stored more than once (extra copies). */
  readonly duplicated: number;
  /** Requests with no answer that were nevertheless stored (allowed: once). */
  readonly unknownStored: number;
  /** Human-readable problems; empty when the ledger balances. */
  readonly problems: readonly string[];
}

/** A small seeded PRNG (mulberry32): reproducible loads without a dependency. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TEXTS = ['How do I reset my password?', 'Go to Settings → Security', 'Réponse en français, naïve', '日本語のテキスト', 'emoji 👍🏽 and "quotes" \\ backslash', 'tab\tnew\nline', 'NUL \u0000 inside'];
const STATUSES: readonly ResponseStatus[] = ['draft', 'submitted', 'discarded'];

/**
 * The ledger: every request the load driver sends and what became of it, then a comparison with
 * what MongoDB holds. Everything acknowledged is stored exactly once and as sent; nothing refused
 * is stored; a request whose answer was lost is stored once or not at all.
 */
export class Ledger {
  readonly run: string;
  readonly entries: Entry[] = [];
  private readonly pairs = new Map<string, Pair>();
  /** Acked, non-poison records: targets for POST /feedback-response. */
  private readonly records: string[] = [];
  private readonly random: () => number;
  private readonly ids = createIdMinter([ID_SECRET]);
  private readonly agents = new Map<string, Agent>();

  constructor(run: string, seed = Date.now()) {
    this.run = run;
    this.random = prng(seed);
  }

  count(outcome: Outcome): number {
    return this.entries.filter((e) => e.outcome === outcome).length;
  }

  get acked(): number {
    return this.count('acked');
  }

  /** Entries answered with `status`. */
  answered(status: number): Entry[] {
    return this.entries.filter((e) => e.status === status);
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  private values(tag: string, n: number, poison: boolean): Record<string, unknown> {
    const v: Record<string, unknown> = { tag, score: n % 7, note: this.pick(TEXTS), flags: [true, false, null], nested: { level: { n, half: n / 2 } } };
    // Larger than the store takes (test/helpers/oversize.ts): refused for good.
    if (poison) v['matrix'] = OVERSIZE_TEXT;
    return v;
  }

  private recordBody(tag: string, n: number, poison: boolean): { body: Record<string, any>; userId: string } {
    const explicitUser = this.random() < 0.4;
    const userId = explicitUser ? `bot-${this.run}-${n}` : LEDGER_KEY.name;
    // Poison sits either in the record (the whole write is refused) or in its first response.
    const poisonWhere = poison ? (n % 2 === 0 ? 'record' : 'response') : undefined;
    const status = this.pick(STATUSES);
    // `values` may be empty only with an explicit `discarded`.
    const empty = status === 'discarded' && this.random() < 0.3 && poisonWhere !== 'response';
    const values = empty ? {} : this.values(tag, n, poisonWhere === 'response');
    const body: Record<string, any> = {
      record: {
        feedback_dataset_id: `ds_${this.run}`,
        field_to_value: { prompt: this.pick(TEXTS), answer: `${this.pick(TEXTS)} #${n}`, ...(poisonWhere === 'record' ? { table: OVERSIZE_TEXT } : {}) },
        external_id: tag,
        ...(this.random() < 0.5 ? { metadata: { model: 'gpt-x', n, tags: ['a', 'b'] } } : {}),
      },
      response: { values, ...(empty || this.random() < 0.8 ? { status } : {}), ...(explicitUser ? { user_id: userId } : {}) },
    };
    return { body, userId };
  }

  /** Picks the next request: a record, a new annotator on an acked record, or an update of an idle pair. */
  private next(n: number, responseShare: number, updateShare: number, poison: boolean): Omit<Entry, 'target' | 'startedAt' | 'endedAt' | 'outcome' | 'status' | 'code' | 'responseId' | 'ms'> & { pair?: Pair } {
    const tag = `${this.run}-${n}`;
    if (this.records.length > 0 && this.random() < responseShare) {
      const idle = [...this.pairs.values()].filter((p) => !p.busy);
      const status = this.pick(STATUSES);
      if (!poison && idle.length > 0 && this.random() < updateShare) {
        const pair = this.pick(idle);
        const omitUser = pair.userId === LEDGER_KEY.name && this.random() < 0.5;
        const body = { feedback_record_id: pair.recordId, response: { status, values: this.values(tag, n, false), ...(omitUser ? {} : { user_id: pair.userId }) } };
        return { n, tag, kind: 'response', body, userId: pair.userId, poison: false, recordId: pair.recordId, pair };
      }
      const recordId = this.pick(this.records);
      const userId = `ann-${this.run}-${n}`;
      const body = { feedback_record_id: recordId, response: { status, values: this.values(tag, n, poison), user_id: userId } };
      const pair: Pair = { recordId, userId, versions: [], busy: false };
      if (!poison) this.pairs.set(`${recordId}\0${userId}`, pair);
      return { n, tag, kind: 'response', body, userId, poison, recordId, pair };
    }
    const { body, userId } = this.recordBody(tag, n, poison);
    return { n, tag, kind: 'record', body, userId, poison, recordId: undefined };
  }

  private agent(target: string, concurrency: number): Agent {
    let a = this.agents.get(target);
    if (a === undefined) {
      // Idle sockets are dropped after 2 s, well before the API closes them (HTTP_KEEP_ALIVE_TIMEOUT_MS,
      // 5 s): a request sent on a socket the server is closing at that moment gets ECONNRESET, no
      // answer (the keep-alive race of every HTTP/1.1 client). Without `timeout` node's Agent keeps
      // idle sockets for ever and ignores the server's `Keep-Alive: timeout=5` hint; with it, the
      // hint less 1 s would apply, which a machine stalled by a failover can overrun. CI saw two
      // such resets at once in the Redis Cluster failover scenario, 2026-11-27.
      a = new Agent({ keepAlive: true, maxSockets: concurrency, timeout: 2_000 });
      this.agents.set(target, a);
    }
    return a;
  }

  /**
   * Books a new request and returns what to send; the caller sends it and calls `settle`. Used by
   * the load driver, and by tests that send a request their own way (slowly, over a raw socket).
   */
  prepare(target: string, options: Pick<LoadOptions, 'responseShare' | 'updateShare' | 'poisonEvery'> = {}): { entry: Entry; path: string; headers: Record<string, string>; body: string } {
    const n = this.counter++;
    const poison = options.poisonEvery !== undefined && n % options.poisonEvery === options.poisonEvery - 1;
    const { pair, ...fields } = this.next(n, options.responseShare ?? 0, options.updateShare ?? 0.7, poison);
    const entry: Entry = { ...fields, target, startedAt: Date.now(), endedAt: undefined, outcome: 'pending', status: undefined, code: undefined, responseId: undefined, ms: undefined };
    this.entries.push(entry);
    if (pair !== undefined) {
      pair.busy = true;
      pair.versions.push(entry);
      this.busy.set(entry, pair);
    }
    return {
      entry,
      path: entry.kind === 'record' ? '/feedback-record' : '/feedback-response',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${LEDGER_KEY.secret}`, 'X-Request-Id': entry.tag },
      body: JSON.stringify(entry.body),
    };
  }

  private readonly busy = new Map<Entry, Pair>();

  /** Books the answer (or the lack of one) of a prepared request. */
  settle(entry: Entry, result: HttpAnswer | NoAnswer): void {
    entry.ms = Date.now() - entry.startedAt;
    entry.endedAt = Date.now();
    const pair = this.busy.get(entry);
    this.busy.delete(entry);
    if (pair !== undefined) pair.busy = false;
    if (result instanceof NoAnswer) {
      entry.outcome = result.sent ? 'unknown' : 'unsent';
      entry.code = result.code;
      return;
    }
    entry.status = result.status;
    if (result.status !== 200) {
      const shape = errorShape(result.json);
      // A 503 whose job may have reached Redis after all (a timeout, a connection lost mid-command).
      entry.outcome = shape?.code === 'queue_unavailable' && shape.message === OUTCOME_UNKNOWN_MESSAGE ? 'unknown' : 'refused';
      entry.code = shape?.code ?? `unshaped:${result.text.slice(0, 80)}`;
      return;
    }
    const b = result.json as { feedback_record_id?: unknown; feedback_response_id?: unknown } | undefined;
    if (typeof b?.feedback_record_id !== 'string' || typeof b.feedback_response_id !== 'string') {
      // A 200 without ids is a broken promise: book it as acknowledged with no ids, so that it shows up as lost.
      entry.outcome = 'acked';
      entry.code = `200 without ids: ${result.text.slice(0, 80)}`;
      return;
    }
    entry.outcome = 'acked';
    entry.recordId = b.feedback_record_id;
    entry.responseId = b.feedback_response_id;
    if (entry.kind === 'record' && !entry.poison) {
      this.records.push(b.feedback_record_id);
      const first: Pair = { recordId: b.feedback_record_id, userId: entry.userId, versions: [entry], busy: false };
      this.pairs.set(`${first.recordId}\0${first.userId}`, first);
    }
  }

  /** Sends one request and books its outcome. */
  private async one(target: string, options: LoadOptions): Promise<Entry> {
    const { entry, path, headers, body } = this.prepare(target, options);
    let result: HttpAnswer | NoAnswer;
    try {
      result = await send(target, path, { headers, body, agent: this.agent(target, options.concurrency), timeoutMs: options.timeoutMs ?? 20_000 });
    } catch (err) {
      if (!(err instanceof NoAnswer)) throw err;
      result = err;
    }
    this.settle(entry, result);
    return entry;
  }

  /** Runs a load in the background; the returned handle resolves when it is over. */
  load(options: LoadOptions): LoadRun {
    let stopped = false;
    let issued = 0;
    let rr = 0;
    const started = Date.now();
    const loop = async () => {
      for (;;) {
        if (stopped || issued >= options.total) return;
        const k = issued++;
        if (options.ratePerSecond !== undefined) {
          const wait = started + (k * 1000) / options.ratePerSecond - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        let targets = options.targets();
        while (targets.length === 0 && !stopped) {
          await new Promise((r) => setTimeout(r, 50));
          targets = options.targets();
        }
        if (stopped) return;
        const target = targets[rr++ % targets.length]!;
        const entry = await this.one(target, options);
        // A refused connection fails at once: do not spin through the whole budget while the API is down.
        if (entry.outcome === 'unsent') await new Promise((r) => setTimeout(r, 50));
      }
    };
    const done = Promise.all(Array.from({ length: options.concurrency }, loop)).then(() => undefined);
    return {
      done,
      stop: () => {
        stopped = true;
      },
    };
  }

  private counter = 0;

  /** Closes the keep-alive connections of the driver. */
  close(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }

  /** Compares the ledger with the database. Call once the queue has drained. */
  async verify(db: Db): Promise<LedgerReport> {
    const problems: string[] = [];
    const note = (p: string) => {
      if (problems.length < 40) problems.push(p);
      else if (problems.length === 40) problems.push('… more problems not listed');
    };
    const recordDocs = await db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.records).find({}).toArray();
    const responseDocs = await db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.responses).find({}).toArray();
    const letters = await db.collection<Record<string, any> & { _id: string }>(COLLECTIONS.deadLetters).find({}).toArray();

    const outcomes: Record<Outcome, number> = { pending: 0, acked: 0, refused: 0, unsent: 0, unknown: 0 };
    for (const e of this.entries) outcomes[e.outcome]++;
    if (outcomes.pending > 0) note(`${outcomes.pending} request(s) still pending at verification`);

    const byTag = new Map<string, (Record<string, any> & { _id: string })[]>();
    for (const d of recordDocs) {
      const tag = typeof d['external_id'] === 'string' ? d['external_id'] : `(no external_id ${d._id})`;
      const list = byTag.get(tag) ?? [];
      list.push(d);
      byTag.set(tag, list);
    }
    const responseById = new Map(responseDocs.map((d) => [d._id, d]));
    const lettersByRequest = new Map<string, Record<string, any>[]>();
    for (const l of letters) {
      const list = lettersByRequest.get(String(l['request_id'])) ?? [];
      list.push(l);
      lettersByRequest.set(String(l['request_id']), list);
    }
    const entryByTag = new Map(this.entries.map((e) => [e.tag, e]));

    let acknowledged = 0;
    let stored = 0;
    let deadLettered = 0;
    let duplicated = 0;
    let unknownStored = 0;
    /** Response documents accounted for by some ledger entry. */
    const explained = new Set<string>();

    // Duplicates: a request stored under two record ids, or two documents for one (record, annotator).
    for (const [tag, docs] of byTag) {
      if (docs.length > 1) {
        duplicated += docs.length - 1;
        note(`record ${tag} stored ${docs.length} times`);
      }
    }
    const perPair = new Map<string, number>();
    for (const d of responseDocs) {
      const k = `${String(d['feedback_record_id'])}\0${String(d['user_id'])}`;
      perPair.set(k, (perPair.get(k) ?? 0) + 1);
    }
    for (const [k, c] of perPair) {
      if (c > 1) {
        duplicated += c - 1;
        note(`response ${k.replace('\0', ' / ')} stored ${c} times`);
      }
    }

    const expectLetter = (e: Entry) => {
      const found = (lettersByRequest.get(e.tag) ?? []).filter((l) => l['reason'] === 'store_rejected');
      if (found.length === 1) deadLettered++;
      else note(`poison write ${e.tag} (${e.kind}) has ${found.length} store_rejected dead letter(s), expected 1`);
    };

    // Records (and, through their pairs below, their first responses).
    for (const e of this.entries.filter((x) => x.kind === 'record')) {
      const docs = byTag.get(e.tag) ?? [];
      const rejectsRecord = e.poison && 'table' in (e.body['record']['field_to_value'] as object);
      if (e.outcome === 'acked') {
        acknowledged++;
        if (rejectsRecord) {
          if (docs.length > 0) note(`poison record ${e.tag} was stored`);
          expectLetter(e);
          continue;
        }
        if (docs.length === 0) {
          note(`acknowledged record ${e.tag} (${e.recordId}) is not stored`);
          continue;
        }
        const doc = docs[0]!;
        const sent = e.body['record'] as Record<string, unknown>;
        const problemsBefore = problems.length;
        if (doc._id !== e.recordId) note(`record ${e.tag} stored under ${doc._id}, answered ${e.recordId}`);
        if (doc['feedback_dataset_id'] !== sent['feedback_dataset_id']) note(`record ${e.tag}: feedback_dataset_id differs`);
        if (!isDeepStrictEqual(doc['field_to_value'], sent['field_to_value'])) note(`record ${e.tag}: field_to_value differs: ${JSON.stringify(doc['field_to_value'])}`);
        if (!isDeepStrictEqual(doc['metadata'], sent['metadata'])) note(`record ${e.tag}: metadata differs`);
        if (doc['status'] !== 'submitted') note(`record ${e.tag}: status ${String(doc['status'])}`);
        if (e.poison) {
          // Its first response is the poison: the record stays, the response is dead-lettered.
          expectLetter(e);
          if (e.responseId !== undefined && responseById.has(e.responseId)) note(`poison first response of ${e.tag} was stored`);
        }
        if (problems.length === problemsBefore && docs.length === 1 && !e.poison) stored++;
      } else if (e.outcome === 'unknown') {
        if (docs.length > 0) {
          unknownStored++;
          // Its first response was in the same write: it must be there too (unless poison).
          const rid = this.ids.responseId(docs[0]!._id, e.userId);
          if (!e.poison && !responseById.has(rid)) note(`record ${e.tag} (answer lost) is stored without its first response`);
          explained.add(rid);
        }
      } else if (docs.length > 0) {
        note(`record ${e.tag} was ${e.outcome} (${e.status ?? e.code ?? ''}) but is stored`);
      }
    }

    // Responses: per pair, the stored version is the last acknowledged one or a later unanswered one.
    for (const pair of this.pairs.values()) {
      const rid = this.ids.responseId(pair.recordId, pair.userId);
      explained.add(rid);
      const doc = responseById.get(rid);
      const versions = pair.versions.filter((v) => !v.poison);
      let lastAcked = -1;
      versions.forEach((v, i) => {
        if (v.outcome === 'acked') lastAcked = i;
      });
      const allowed = versions.filter((v, i) => (i === lastAcked || (i > lastAcked && v.outcome === 'unknown')));
      for (const v of versions) if (v.outcome === 'acked' && v.kind === 'response') acknowledged++;
      if (doc === undefined) {
        if (lastAcked >= 0) note(`acknowledged response ${versions[lastAcked]!.tag} (${rid}) is not stored`);
        continue;
      }
      const storedTag = (doc['values'] as Record<string, unknown> | undefined)?.['tag'];
      const version = versions.find((v) => responseValues(v)['tag'] === storedTag) ?? (Object.keys((doc['values'] as object | undefined) ?? {}).length === 0 ? versions.find((v) => Object.keys(responseValues(v)).length === 0 && allowed.includes(v)) : undefined);
      if (version === undefined || !allowed.includes(version)) {
        const refused = versions.find((v) => responseValues(v)['tag'] === storedTag);
        note(`response ${rid}: stored version ${String(storedTag)} is not the last acknowledged one (${lastAcked >= 0 ? versions[lastAcked]!.tag : 'none'})${refused === undefined ? '' : `; it was ${refused.outcome}`}`);
        continue;
      }
      if (version.outcome === 'unknown') unknownStored++;
      const r = version.body['response'] as Record<string, unknown>;
      const expectedStatus = (r['status'] as string | undefined) ?? 'submitted';
      const problemsBefore = problems.length;
      if (doc['feedback_record_id'] !== pair.recordId || doc['user_id'] !== pair.userId) note(`response ${rid}: record/user differ`);
      if (doc['status'] !== expectedStatus) note(`response ${rid}: status ${String(doc['status'])}, sent ${expectedStatus}`);
      if (!isDeepStrictEqual(doc['values'], r['values'])) note(`response ${rid}: values differ: ${JSON.stringify(doc['values'])}`);
      if (problems.length === problemsBefore) {
        // Every acknowledged version up to the stored one was applied in order (a later one superseded it).
        stored += versions.filter((v, i) => v.outcome === 'acked' && v.kind === 'response' && i <= versions.indexOf(version)).length;
      }
    }
    // Poison responses sent on their own.
    for (const e of this.entries.filter((x) => x.kind === 'response' && x.poison)) {
      if (e.outcome !== 'acked') continue;
      acknowledged++;
      const rid = this.ids.responseId(e.recordId!, e.userId);
      explained.add(rid);
      if (responseById.has(rid)) note(`poison response ${e.tag} was stored`);
      expectLetter(e);
    }
    // Response entries that were never acked and opened a pair that was not kept (poison) are covered;
    // anything else stored is unexplained.
    for (const d of responseDocs) {
      if (explained.has(d._id)) continue;
      const tag = (d['values'] as Record<string, unknown> | undefined)?.['tag'];
      const e = typeof tag === 'string' ? entryByTag.get(tag) : undefined;
      note(`response ${d._id} (${String(tag)}) is stored but ${e === undefined ? 'was never sent' : `was ${e.outcome}`}`);
    }
    for (const [tag, docs] of byTag) {
      if (!entryByTag.has(tag)) note(`record ${tag} (${docs[0]!._id}) is stored but was never sent`);
    }
    const unexpectedLetters = letters.filter((l) => entryByTag.get(String(l['request_id']))?.poison !== true);
    for (const l of unexpectedLetters.slice(0, 5)) note(`unexpected dead letter ${String(l._id)}: ${String(l['reason'])} ${String(l['error']).slice(0, 200)}`);
    if (unexpectedLetters.length > 5) note(`${unexpectedLetters.length} unexpected dead letters in all`);

    return { requests: this.entries.length, outcomes, acknowledged, stored, deadLettered, duplicated, unknownStored, problems };
  }
}

function responseValues(e: Entry): Record<string, unknown> {
  return ((e.body['response'] as Record<string, unknown>)['values'] as Record<string, unknown> | undefined) ?? {};
}

/** The ledger balances: no problem, nothing pending or duplicated, and the scenario acknowledged writes. */
export function assertBalanced(r: LedgerReport): void {
  assert.deepEqual(r.problems, [], `the ledger does not balance:\n${r.problems.join('\n')}`);
  assert.equal(r.outcomes.pending, 0);
  assert.equal(r.duplicated, 0, 'duplicates stored');
  assert.ok(r.acknowledged > 0, 'nothing was acknowledged: the scenario did not run');
}
