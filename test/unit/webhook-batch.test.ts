import { expect } from 'chai';
import { eventBody, eventId, type StoredEvent } from '../../shared/webhook-events.js';
import { batchLine, decodeBatch, encodeBatch } from '../../shared/webhook-outbox.js';

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
});
