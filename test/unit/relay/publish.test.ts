import { topicForReplacement } from '../../../src/codec';
import { publishBatch, recordFor, type KeyGroup, type OutboxRow, type RelayRecord, type Sender } from '../../../src/relay';

const topicFor = topicForReplacement('e.${routedByValue}');
const rec = (id: string, key: string): RelayRecord =>
  recordFor(
    { id, aggregate_type: 't', aggregate_id: key, event_type: 'E', payload: Buffer.from(id), content_type: 'application/json', traceparent: null, headers: null, created_at: new Date(0), attempts: 0 } as OutboxRow,
    topicFor,
  );

function fakeSender(fail: { all?: boolean; keys?: string[] } = {}) {
  const sent: string[][] = [];
  const sender: Sender = {
    async sendAll(records) {
      if (fail.all) throw new Error('batch refused');
      sent.push(records.map((r) => r.rowId));
    },
    async sendKey(group: KeyGroup) {
      if (fail.keys?.includes(group.key)) throw new Error(`key ${group.key} refused`);
      sent.push(group.records.map((r) => r.rowId));
    },
  };
  return { sender, sent };
}

describe('publishBatch', () => {
  const batch = [rec('1', 'a'), rec('2', 'b'), rec('3', 'a'), rec('4', 'c'), rec('5', 'b')];

  it('sends the whole batch in one call when it can', async () => {
    const { sender, sent } = fakeSender();
    const out = await publishBatch(batch, sender);
    expect(sent).toEqual([['1', '2', '3', '4', '5']]);
    expect(out.published.map((r) => r.rowId)).toEqual(['1', '2', '3', '4', '5']);
    expect(out.failed).toEqual([]);
  });

  it('after a failed batch, sends key by key: a failing key holds back all of its records, the other keys go through', async () => {
    const { sender, sent } = fakeSender({ all: true, keys: ['a'] });
    const out = await publishBatch(batch, sender);
    expect(sent).toEqual([['2', '5'], ['4']]);
    expect(out.published.map((r) => r.rowId).sort()).toEqual(['2', '4', '5']);
    expect(out.failed.map((f) => [f.group.key, f.group.records.map((r) => r.rowId), (f.error as Error).message])).toEqual([['a', ['1', '3'], 'key a refused']]);
  });

  it('stops trying keys once a whole wave fails (the broker is down), failing the rest untried', async () => {
    const many = Array.from({ length: 10 }, (_, i) => rec(String(i), `k${i}`));
    const calls: string[] = [];
    const sender: Sender = {
      sendAll: async () => Promise.reject(new Error('down')),
      sendKey: async (g) => {
        calls.push(g.key);
        throw new Error('down');
      },
    };
    const out = await publishBatch(many, sender, 3);
    expect(calls).toEqual(['k0', 'k1', 'k2']);
    expect(out.published).toEqual([]);
    expect(out.failed.map((f) => f.group.key)).toEqual(many.map((r) => r.key));
  });

  it('a single-key batch that fails is not retried key by key', async () => {
    const calls: string[] = [];
    const sender: Sender = { sendAll: async () => Promise.reject(new Error('x')), sendKey: async (g) => void calls.push(g.key) };
    const out = await publishBatch([rec('1', 'a'), rec('2', 'a')], sender);
    expect(calls).toEqual([]);
    expect(out.failed).toHaveLength(1);
    expect(out.failed[0]?.group.records.map((r) => r.rowId)).toEqual(['1', '2']);
  });

  it('an empty batch sends nothing', async () => {
    const { sender, sent } = fakeSender();
    expect(await publishBatch([], sender)).toEqual({ published: [], failed: [] });
    expect(sent).toEqual([]);
  });
});
