import { expect } from 'chai';
import { eventBody, eventId, type StoredEvent } from '../../shared/webhook-events.js';
import { batchLine, encodeBatch } from '../../shared/webhook-outbox.js';
import type { RecordWrite } from '../../shared/writes.js';
import { decodeBatch, lineEvents, writeLines } from '../../worker/batch-lines.js';
import { firstResponseDoc, recordDoc } from '../../worker/documents.js';
import { recordCreatedEvent, responseEvent } from '../../worker/stored-events.js';

describe('webhook batches: an event read back from its batch is sent with the bytes eventBody gives it', () => {
  const at = new Date('2026-11-26T10:00:00.123Z');
  const tricky = { text: 'line one\nline two\r\n"quoted" \\ back\u2028sep\u2029para', emoji: '😀 é ß', n: [0, -1.5, 1e21, 123456789012345], nested: { a: [{ b: null }], t: true } };
  const events: StoredEvent[] = [
    { type: 'record.created', seq: 5, recordId: 'rec_1', subjectId: 'rec_1', datasetId: 'ds', at, data: { feedback_record_id: 'rec_1', field_to_value: tricky } as never },
    { type: 'response.updated', seq: 9, recordId: 'rec_1', subjectId: 'rsp_1', datasetId: 'ds', at, data: { feedback_response_id: 'rsp_1', values: { comment: tricky.text } } as never },
  ];

  it('round trip: same order, ids, keys, order fields and body bytes', async () => {
    const z = await encodeBatch(events.map((e) => batchLine(e, eventId(e))));
    const back = decodeBatch({ z });
    expect(back.map((e) => [e.event_id, e.event_type, e.key, e.subject_id, e.seq, e.rank, e.dataset_id])).to.deep.equal([
      [eventId(events[0]!), 'record.created', 'rec_1', 'rec_1', 5, 0, 'ds'],
      [eventId(events[1]!), 'response.updated', 'rec_1', 'rsp_1', 9, 1, 'ds'],
    ]);
    expect(back.map((e) => e.body)).to.deep.equal(events.map(eventBody));
  });

  it('a batch of many events stays in order (deflated off the event loop when large)', async () => {
    const many = Array.from({ length: 600 }, (_, i): StoredEvent => ({ type: 'response.created', seq: i, recordId: `rec_${i}`, subjectId: `rsp_${i}`, datasetId: 'ds', at, data: { feedback_response_id: `rsp_${i}`, values: { comment: `${tricky.text} ${i}` } } as never }));
    const back = decodeBatch({ z: await encodeBatch(many.map((e) => batchLine(e, eventId(e)))) });
    expect(back.map((e) => e.seq)).to.deep.equal(many.map((e) => e.seq));
    expect(back.map((e) => e.body)).to.deep.equal(many.map(eventBody));
  });

  describe('write lines: a stored record write appended as itself gives the events a round would have built', () => {
    const write: RecordWrite = {
      kind: 'record',
      request_id: 'req-1',
      accepted_at: Date.parse('2026-11-26T10:00:00.123Z'),
      api_key: 'tester',
      record_id: 'rec_1',
      response_id: 'rsp_1',
      seq: 42,
      record: { feedback_dataset_id: 'ds', field_to_value: { prompt: tricky.text, answer: tricky.emoji }, external_id: 'ext-1', metadata: { model: 'm', n: 1.5 } },
      response: { status: 'submitted', values: { helpful: 1, comment: tricky.text }, user_id: 'user-1' },
    } as RecordWrite;
    // What the store round inserted: the record with the completion rule's status, the first response.
    const record = { ...recordDoc(write, 42), status: 'completed' as const };
    const expected = [recordCreatedEvent(record, 42), responseEvent(firstResponseDoc({ write, seq: 42, index: 0 }), 42)];

    it('both events: one line, decoded to the same ids, order fields and body bytes as event lines', async () => {
      const lines = writeLines({ write, seq: 42, status: 'completed', types: ['record.created', 'response.created'] }, ['record.created', 'response.created']);
      expect(lines.map((l) => l.events)).to.deep.equal([2]);
      const back = decodeBatch({ z: await encodeBatch([batchLine(events[0]!, eventId(events[0]!)), ...lines.map((l) => l.line)]) });
      const direct = decodeBatch({ z: await encodeBatch([events[0]!, ...expected].map((e) => batchLine(e, eventId(e)))) });
      expect(back).to.deep.equal(direct);
      expect(back.slice(1).map((e) => [e.event_type, e.subject_id, e.key, e.rank])).to.deep.equal([
        ['record.created', 'rec_1', 'rec_1', 0],
        ['response.created', 'rsp_1', 'rec_1', 1],
      ]);
      expect(JSON.parse(back[1]!.body)).to.have.nested.property('data.status', 'completed');
    });

    it('one of them: an event line, never the write (its other half would then outlive an erasure of it)', () => {
      for (const type of ['record.created', 'response.created'] as const) {
        const lines = writeLines({ write, seq: 42, status: 'completed', types: ['record.created', 'response.created'] }, [type]);
        expect(lines).to.have.length(1);
        expect(lines[0]!.line).to.not.include('"w":');
        expect(lineEvents(lines[0]!.line).map((l) => l.type)).to.deep.equal([type]);
        const e = expected.find((x) => x.type === type)!;
        expect(lines[0]!.line).to.equal(batchLine(e, eventId(e)));
      }
    });
  });
});
