import type { RecordWrite, ResponseWrite, SuggestionWrite } from '../../shared/writes.js';
import type { SequencedWrite } from '../../worker/documents.js';

/** Writes for the writer's tests: records and numbered versions of their responses. */
/** A deterministic shuffle (mulberry32), so a failing order can be replayed from the printed seed. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const BASE_SEQ = 2 ** 50;

export function recordWrite(n: number): SequencedWrite {
  const write: RecordWrite = {
    kind: 'record',
    request_id: `req-rec-${n}`,
    accepted_at: 1_700_000_000_000 + n,
    api_key: 'tester',
    record_id: `rec_writer_test_${String(n).padStart(4, '0')}`,
    response_id: `rsp_first_${n}`,
    record: { feedback_dataset_id: 'ds_writer', field_to_value: { q: `question ${n}` } },
    response: { status: 'submitted', values: { first: n }, user_id: 'end-user' },
  };
  return { write, seq: BASE_SEQ + n, index: 0 };
}

/** Version `v` of the response of (record `r`, annotator `u`); a higher `v` was accepted later. */
export function version(r: number, u: number, v: number, values: Record<string, unknown> = { v }): SequencedWrite {
  const write: ResponseWrite = {
    kind: 'response',
    request_id: `req-${r}-${u}-${v}`,
    accepted_at: 1_700_000_100_000 + v,
    api_key: 'tester',
    record_id: `rec_writer_test_${String(r).padStart(4, '0')}`,
    response_id: `rsp_${r}_${u}`,
    response: { status: 'draft', values, user_id: `ann-${u}` },
  };
  return { write, seq: BASE_SEQ + 1_000_000 + v * 1000 + r * 10 + u, index: 0 };
}

/**
 * Version `v` of agent `agent`'s suggestion for `question` of record `r`; a higher `v` was
 * accepted later. The suggestion id is the test's own: the writer keys on whatever the API minted.
 */
export function suggestionVersion(r: number, question: string, agent: string, v: number, value: unknown = `v${v}`, score?: number): SequencedWrite {
  const write: SuggestionWrite = {
    kind: 'suggestion',
    request_id: `req-sug-${r}-${question}-${agent}-${v}`,
    accepted_at: 1_700_000_200_000 + v,
    api_key: 'tester',
    record_id: `rec_writer_test_${String(r).padStart(4, '0')}`,
    suggestion: { suggestion_id: `sug_${r}_${question}_${agent}`, question, value, agent, ...(score === undefined ? {} : { score }) },
  };
  return { write, seq: BASE_SEQ + 2_000_000 + v * 1000 + r, index: 0 };
}
