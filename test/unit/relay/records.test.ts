import { topicForReplacement } from '../../../src/codec';
import { chunkByBytes, groupByKey, recordBytes, recordFor, type OutboxRow, type RelayRecord } from '../../../src/relay';
import { groupByTopic } from '../../../src/relay/records';

const row = (over: Partial<OutboxRow> = {}): OutboxRow => ({
  id: '0190f6c2-7a5b-7c3d-8e9f-0a1b2c3d4e5f',
  aggregate_type: 'order',
  aggregate_id: 'o-1',
  event_type: 'OrderCreated',
  payload: Buffer.from([0, 0, 0, 0, 7, 2, 4]),
  content_type: 'application/vnd.apache.avro+binary',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  headers: '{"tenant":"acme"}',
  created_at: new Date('2026-01-01T00:00:00Z'),
  attempts: 2,
  ...over,
});

describe('recordFor: the Event Router record of a row', () => {
  const topicFor = topicForReplacement('outbox.event.${routedByValue}');

  it('routes by aggregate type, keys by aggregate id, carries the payload bytes unchanged and the contract headers in the SMT order', () => {
    const r = row();
    const record = recordFor(r, topicFor);
    expect(record.topic).toBe('outbox.event.order');
    expect(record.key).toBe('o-1');
    expect(record.value).toBe(r.payload); // the same bytes, no copy, no re-encoding
    expect(Object.keys(record.headers)).toEqual(['id', 'eventType', 'contentType', 'traceparent', 'headers']);
    expect(record.headers).toEqual({
      id: r.id,
      eventType: 'OrderCreated',
      contentType: 'application/vnd.apache.avro+binary',
      traceparent: r.traceparent,
      headers: '{"tenant":"acme"}',
    });
    expect(record).toMatchObject({ rowId: r.id, aggregateId: 'o-1', attempts: 2 });
  });

  it('leaves out a header whose column is NULL (kafkajs cannot encode a null header value)', () => {
    const record = recordFor(row({ traceparent: null, headers: null }), topicFor);
    expect(Object.keys(record.headers)).toEqual(['id', 'eventType', 'contentType']);
  });

  it('uses the configured route.topic.replacement, prefix and all', () => {
    expect(recordFor(row({ aggregate_type: 'invoice' }), topicForReplacement('staging.outbox.event.${routedByValue}')).topic).toBe('staging.outbox.event.invoice');
  });
});

describe('grouping', () => {
  const topicFor = topicForReplacement('e.${routedByValue}');
  const rs = [
    row({ id: '1', aggregate_id: 'a' }),
    row({ id: '2', aggregate_id: 'b' }),
    row({ id: '3', aggregate_id: 'a' }),
    row({ id: '4', aggregate_id: 'a', aggregate_type: 'invoice' }),
    row({ id: '5', aggregate_id: 'b' }),
  ].map((r) => recordFor(r, topicFor));

  it('groups by (topic, key), keeping claim order inside a group and first-seen order of groups', () => {
    expect(groupByKey(rs).map((g) => [g.topic, g.key, g.records.map((r) => r.rowId)])).toEqual([
      ['e.order', 'a', ['1', '3']],
      ['e.order', 'b', ['2', '5']],
      ['e.invoice', 'a', ['4']],
    ]);
  });

  it('groups by topic in claim order', () => {
    expect(groupByTopic(rs).map((g) => [g.topic, g.records.map((r) => r.rowId)])).toEqual([
      ['e.order', ['1', '2', '3', '5']],
      ['e.invoice', ['4']],
    ]);
  });
});

describe('chunkByBytes', () => {
  const topicFor = topicForReplacement('e.${routedByValue}');
  const sized = (id: string, bytes: number) => recordFor(row({ id, payload: Buffer.alloc(bytes), traceparent: null, headers: null }), topicFor);

  it('keeps order and cuts before a record that would overflow the chunk; an oversized record goes alone', () => {
    const rs = [sized('1', 300), sized('2', 300), sized('3', 300), sized('4', 2_000), sized('5', 10)];
    const size = recordBytes(rs[0] as RelayRecord);
    const chunks = chunkByBytes(rs, size * 2 + 1);
    expect(chunks.map((c) => c.map((r) => r.rowId))).toEqual([['1', '2'], ['3'], ['4'], ['5']]);
  });

  it('one chunk when everything fits, none for nothing', () => {
    expect(chunkByBytes([sized('1', 10), sized('2', 10)], 1_000_000)).toHaveLength(1);
    expect(chunkByBytes([], 100)).toEqual([]);
  });

  it('counts key, value and header bytes', () => {
    const r = recordFor(row({ payload: Buffer.alloc(1000) }), topicFor);
    expect(recordBytes(r)).toBeGreaterThan(1000 + Buffer.byteLength(r.key) + Buffer.byteLength(String(r.headers.traceparent)));
  });
});
