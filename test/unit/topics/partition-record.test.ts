/** Which routed topics changed their partition count outside `outbox topics:grow` (pure part). */
import { describeChange, partitionChanges, type RecordedPartitions } from '../../../src/topics/partition-record';
import { computeVerdict } from '../../../src/status/verdict';
import { renderStatus } from '../../../src/status/render';
import { healthy } from '../status/fixtures';

const record = (topic: string, partitions: number, recordedBy = 'connector:deploy'): RecordedPartitions => ({ topic, partitions, recordedAt: '2026-12-06T18:00:00.000Z', recordedBy });

describe('partitionChanges', () => {
  it('compares a recorded topic with its record, whatever the creation default', () => {
    const current = new Map([['outbox.event.order', 6], ['outbox.event.payment', 3]]);
    expect(partitionChanges(current, [record('outbox.event.order', 3), record('outbox.event.payment', 3, 'topics:grow')], 6)).toEqual([
      { topic: 'outbox.event.order', partitions: 6, expected: 3, source: 'connector:deploy', since: '2026-12-06T18:00:00.000Z' },
    ]);
  });

  it('compares an unrecorded topic (made by the connector after its deploy) with the creation default, unless that is the broker default', () => {
    const current = new Map([['outbox.event.invoice', 4]]);
    expect(partitionChanges(current, [], 3)).toEqual([{ topic: 'outbox.event.invoice', partitions: 4, expected: 3, source: 'topic.creation.default.partitions', since: null }]);
    expect(partitionChanges(current, [], 4)).toEqual([]);
    expect(partitionChanges(current, [], -1)).toEqual([]);
    expect(partitionChanges(current, [], undefined)).toEqual([]);
  });

  it('ignores records of topics that no longer exist', () => {
    expect(partitionChanges(new Map(), [record('outbox.event.gone', 3)], 3)).toEqual([]);
  });
});

describe('a partition change in outbox status', () => {
  const change = { topic: 'outbox.event.order', partitions: 6, expected: 3, source: 'connector:deploy', since: '2026-12-06T18:00:00.000Z' };

  it('says what changed, what it risks and what to do', () => {
    const text = describeChange(change);
    expect(text).toContain('topic outbox.event.order has 6 partitions, not 3 when connector:deploy recorded it (2026-12-06T18:00:00.000Z)');
    expect(text).toContain('added outside `outbox topics:grow`');
    expect(text).toMatch(/out of order/);
    expect(describeChange({ ...change, source: 'topic.creation.default.partitions', since: null })).toContain("not 3, the connector's topic.creation.default.partitions");
  });

  it('is a warning of the verdict, and marked in the rendered table', () => {
    const status = healthy();
    expect(computeVerdict(status).level).toBe('OK');
    status.topicPartitions = { ok: true, ms: 1, recorded: true, creationDefault: 3, topics: [{ topic: 'outbox.event.order', partitions: 6, recorded: 3 }], changes: [change] };
    const verdict = computeVerdict(status);
    expect(verdict.level).toBe('WARNING');
    expect(verdict.reasons.map((r) => r.message)).toEqual([describeChange(change)]);
    const text = renderStatus({ ...status, verdict }, { color: false });
    expect(text).toContain('Routed topics (partitions against the count recorded by connector:deploy or topics:grow)');
    expect(text).toMatch(/│ outbox\.event\.order +│ 6 +│ 3 \(connector:deploy\) +│/);
  });

  it('an unreadable section is a warning that names it', () => {
    const status = healthy();
    status.topicPartitions = { ok: false, ms: 1, error: 'Kafka is down. Check that Kafka answers.' };
    expect(computeVerdict(status).reasons.map((r) => r.message)).toEqual(["routed topics' partitions: could not be checked (Kafka is down)"]);
  });
});
