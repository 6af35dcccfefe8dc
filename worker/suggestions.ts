import type { Collection } from 'mongodb';
import type { SuggestionDoc } from '../shared/documents.js';
import type { StoredSuggestion } from '../shared/writes.js';
import { isRecordWrite, isSuggestionWrite, type ConditionalUpdate, type SequencedWrite } from './documents.js';
import { applyUpdates } from './updates.js';

/*
 * The suggestions of one store round: one current suggestion per (record, question, agent),
 * kept in acceptance order by the same conditional upsert as responses (updates.ts). A
 * suggestion comes as a write of its own or with a new record (its `suggestions`, stored with the
 * record's order); only the newest version of each suggestion in the round is written, and when
 * the store refuses it for good the next older one is tried.
 */

/** A suggestion version stored by a round: what the webhooks' outbox (issue 24) emits as an event. */
export interface SuggestionChange {
  readonly suggestion_id: string;
  readonly feedback_record_id: string;
  readonly feedback_dataset_id: string;
  readonly question: string;
  readonly agent: string;
  readonly value: unknown;
  readonly score?: number;
  /** Acceptance order of the version stored. */
  readonly seq: number;
  /** When the API accepted it, ms since the epoch. */
  readonly accepted_at: number;
}

/** What became of the suggestions of one write (a record write's: all of its list). */
export type SuggestionOutcome =
  | { readonly kind: 'stored' }
  | { readonly kind: 'stale' }
  | { readonly kind: 'deferred' }
  | { readonly kind: 'rejected'; readonly error: string };

export interface SuggestionRound {
  /**
   * Stores the suggestions of `items`: suggestion writes whose record is in `datasets` (the
   * others are deferred) and the lists of record writes that `recordStored` says are stored. Per
   * write index, its outcome; a record write is `rejected` when one of its suggestions is refused
   * for good, else `stored`. Applied versions are passed to `onStored` (a version applied again by
   * a job run twice is passed again: at least once).
   */
  store(items: readonly SequencedWrite[], datasets: ReadonlyMap<string, string>, recordStored: (index: number) => boolean): Promise<Map<number, SuggestionOutcome>>;
}

interface Candidate {
  /** Index of the write that carries it. */
  readonly index: number;
  /** Place in a record write's list: with equal orders, the later one in the list wins. */
  readonly place: number;
  readonly seq: number;
  readonly recordId: string;
  readonly datasetId: string;
  readonly suggestion: StoredSuggestion;
  readonly apiKey: string;
  readonly requestId: string;
  readonly acceptedAt: number;
}

const STORED: SuggestionOutcome = { kind: 'stored' };
const STALE: SuggestionOutcome = { kind: 'stale' };
const DEFERRED: SuggestionOutcome = { kind: 'deferred' };

/**
 * The conditional upsert of one suggestion version (as documents.ts `responseUpdate`): applies
 * over an earlier (or the same) version; a later one stored makes it a duplicate key, read as stale.
 * `createdAt`: the earliest version of the triple the round knows of.
 */
export function suggestionUpdate(c: Candidate, createdAt: number): ConditionalUpdate<SuggestionDoc> {
  const s = c.suggestion;
  const set = { value: s.value, seq: c.seq, api_key: c.apiKey, request_id: c.requestId, updated_at: new Date(c.acceptedAt) };
  return {
    filter: { _id: s.suggestion_id, seq: { $lte: c.seq } },
    update: {
      // A version without a score must not keep the score of the one it replaces.
      ...(s.score === undefined ? { $set: set, $unset: { score: '' } } : { $set: { ...set, score: s.score } }),
      $setOnInsert: { feedback_record_id: c.recordId, feedback_dataset_id: c.datasetId, question: s.question, agent: s.agent, created_at: new Date(createdAt) },
    },
  };
}

function candidatesOf(items: readonly SequencedWrite[], datasets: ReadonlyMap<string, string>, recordStored: (index: number) => boolean, outcomes: Map<number, SuggestionOutcome>): Candidate[] {
  const out: Candidate[] = [];
  for (const [index, item] of items.entries()) {
    const w = item.write;
    const common = { index, seq: item.seq, recordId: w.record_id, apiKey: w.api_key, requestId: w.request_id, acceptedAt: w.accepted_at };
    if (isSuggestionWrite(item)) {
      const datasetId = datasets.get(w.record_id);
      if (datasetId === undefined) outcomes.set(index, DEFERRED);
      else out.push({ ...common, place: 0, datasetId, suggestion: item.write.suggestion });
    } else if (isRecordWrite(item) && item.write.suggestions !== undefined && recordStored(index)) {
      const datasetId = item.write.record.feedback_dataset_id;
      item.write.suggestions.forEach((suggestion, place) => out.push({ ...common, place, datasetId, suggestion }));
    }
  }
  return out;
}

/** Newest first: by order, then by place in a record's list. */
const newestFirst = (a: Candidate, b: Candidate): number => b.seq - a.seq || b.place - a.place;

export function createSuggestionRound(options: {
  readonly suggestions: Collection<SuggestionDoc>;
  /** Called with the versions a round stored, after the round's store commands. */
  readonly onStored?: ((changes: readonly SuggestionChange[]) => void) | undefined;
}): SuggestionRound {
  const { suggestions, onStored } = options;

  return {
    async store(items, datasets, recordStored) {
      const outcomes = new Map<number, SuggestionOutcome>();
      const bySuggestion = new Map<string, Candidate[]>();
      for (const c of candidatesOf(items, datasets, recordStored, outcomes)) {
        const list = bySuggestion.get(c.suggestion.suggestion_id);
        if (list === undefined) bySuggestion.set(c.suggestion.suggestion_id, [c]);
        else list.push(c);
      }
      // Per write, the worst of its suggestions: rejected > stored > stale (a record write's list decides together).
      const settle = (c: Candidate, outcome: SuggestionOutcome) => {
        const before = outcomes.get(c.index);
        if (before?.kind === 'rejected') return;
        if (outcome.kind === 'stale' && before?.kind === 'stored') return;
        outcomes.set(c.index, outcome);
      };
      const changes: SuggestionChange[] = [];
      let open = [...bySuggestion.values()].map((list) => list.sort(newestFirst));
      while (open.length > 0) {
        const ops = open.map((list) => suggestionUpdate(list[0]!, Math.min(...list.map((c) => c.acceptedAt))));
        const applied = await applyUpdates(suggestions, ops);
        const next: Candidate[][] = [];
        open.forEach(([top, ...older], k) => {
          const outcome = applied[k]!;
          if (outcome.kind === 'rejected') {
            settle(top!, outcome);
            if (older.length > 0) next.push(older);
          } else if (outcome.kind === 'applied') {
            settle(top!, STORED);
            changes.push(changeOf(top!));
            for (const c of older) settle(c, STALE);
          } else {
            for (const c of [top!, ...older]) settle(c, STALE);
          }
        });
        open = next;
      }
      if (changes.length > 0) onStored?.(changes);
      // A record write is stored with its suggestions when none of them was refused, whatever lost to a later version.
      for (const [index, outcome] of outcomes) {
        if (outcome.kind === 'stale' && isRecordWrite(items[index]!)) outcomes.set(index, STORED);
      }
      return outcomes;
    },
  };
}

function changeOf(c: Candidate): SuggestionChange {
  const s = c.suggestion;
  return {
    suggestion_id: s.suggestion_id,
    feedback_record_id: c.recordId,
    feedback_dataset_id: c.datasetId,
    question: s.question,
    agent: s.agent,
    value: s.value,
    ...(s.score === undefined ? {} : { score: s.score }),
    seq: c.seq,
    accepted_at: c.acceptedAt,
  };
}
