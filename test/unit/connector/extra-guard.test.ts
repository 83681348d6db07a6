/** src/connector/extra-guard.ts: the guard rails on silent loss, compaction and header bytes. */
import { loadConfig } from '../../../src/config';
import { buildConnectorConfig } from '../../../src/connector';
import { unsafeExtra } from '../../../src/connector/extra-guard';
import { thrown } from '../../support/expect-error';

const config = () => loadConfig({ env: {}, overrides: {} });
const base = buildConnectorConfig(config());

describe('guard rails that lose or rewrite events', () => {
  it.each([
    ['event.processing.failure.handling.mode', 'skip', /skip a change event .* an outbox row is lost/],
    ['event.processing.failure.handling.mode', 'warn', /warn only logs it/],
    ['topic.creation.default.cleanup.policy', 'compact', /latest record per key \(aggregate_id\)/],
    ['topic.creation.default.cleanup.policy', 'compact,delete', /older events of an aggregate are deleted/],
    ['topic.creation.dlq.cleanup.policy', 'compact', /compacted topic/],
    ['header.converter', 'org.apache.kafka.connect.json.JsonConverter', /plain strings .*SimpleHeaderConverter/],
    ['header.converter.schemas.enable', 'true', /header\.converter settings change the bytes/],
  ])('refuses %s=%s with the reason, and allows it with --force', (key, value, reason) => {
    const error = thrown(() => buildConnectorConfig(config(), { extra: { [key]: value } }));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.message).toContain(`${key}=${value}`);
    expect(error.message).toMatch(reason);
    expect(error.message).toContain('--force');
    expect(buildConnectorConfig(config(), { extra: { [key]: value }, allowUnsafe: true })[key]).toBe(value);
  });

  it('accepts the safe values of the same keys', () => {
    expect(
      unsafeExtra(base, {
        'event.processing.failure.handling.mode': 'fail',
        'topic.creation.default.cleanup.policy': 'delete',
        'header.converter': 'org.apache.kafka.connect.storage.SimpleHeaderConverter',
      }),
    ).toEqual([]);
  });
});
