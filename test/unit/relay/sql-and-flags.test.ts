import { relayFlagSettings } from '../../../src/cli/relay-command';
import { loadConfig } from '../../../src/config';
import { buildRelaySql, lockNamespaces, SHARD_EXPRESSION } from '../../../src/relay';
import { thrown } from '../../support/expect-error';

describe('relay SQL', () => {
  const sql = buildRelaySql('my "schema"', 'out box');

  it('escapes the configured identifiers everywhere', () => {
    for (const text of [sql.check, sql.claim, sql.probe, sql.mark, sql.cleanup, sql.lag]) expect(text).toContain('"my ""schema"""."out box"');
  });

  it('claims by published_at IS NULL (never an id cursor), per shard, oldest first, FOR UPDATE SKIP LOCKED, under the shard lock', () => {
    expect(sql.claim).toContain('published_at IS NULL');
    expect(sql.claim).not.toMatch(/id\s*>\s*\$/);
    expect(sql.claim).toContain(`${SHARD_EXPRESSION} = $2`);
    expect(sql.claim).toMatch(/ORDER BY created_at, id LIMIT \$4 FOR UPDATE SKIP LOCKED$/);
    expect(sql.claim).toContain('pg_try_advisory_xact_lock(hashtext($1), $2)');
    expect(sql.claim).toContain('NOT (aggregate_id = ANY($5::text[]))');
  });

  it('shards on hashtext with the sign bit cleared (abs() overflows on -2^31)', () => {
    expect(SHARD_EXPRESSION).toBe('(hashtext(aggregate_id) & 2147483647) % $3');
  });

  it('probes an idle shard with one statement, outside a transaction and without locks', () => {
    expect(sql.probe).toContain('published_at IS NULL AND (hashtext(aggregate_id) & 2147483647) % $2 = $1');
    expect(sql.probe).toMatch(/LIMIT 1$/);
    expect(sql.probe).not.toMatch(/FOR UPDATE|advisory/);
  });

  it('marks published and counts attempts in one statement, only for rows still unpublished', () => {
    expect(sql.mark).toContain('attempts = attempts + 1');
    expect(sql.mark).toContain('published_at = CASE WHEN id = ANY($1::uuid[]) THEN now() ELSE NULL END');
    expect(sql.mark).toMatch(/WHERE id = ANY\(\$2::uuid\[\]\) AND published_at IS NULL$/);
  });

  it('deletes only published rows past retention, one bounded batch per statement', () => {
    expect(sql.cleanup).toMatch(/^DELETE FROM .* WHERE id IN \(SELECT id FROM .* WHERE published_at < now\(\) - \$1::float8 \* interval '1 millisecond' LIMIT \$2 FOR UPDATE SKIP LOCKED\)$/);
  });

  it('keeps lock namespaces per table', () => {
    expect(lockNamespaces('public', 'outbox')).toEqual({ shards: 'outbox-relay:shards:public.outbox', members: 'outbox-relay:members:public.outbox' });
    expect(lockNamespaces('a', 'b').shards).not.toBe(lockNamespaces('a', 'c').shards);
  });
});

describe('relay settings', () => {
  it('has defaults for the local stack', () => {
    expect(loadConfig({ env: {} }).relay).toMatchObject({ workers: 4, batchSize: 500, pollIntervalMs: 100, metricsPort: 9466 });
  });

  it('reads OUTBOX_RELAY_* variables and names the variable of a bad value', () => {
    expect(loadConfig({ env: { OUTBOX_RELAY_WORKERS: '8', OUTBOX_RELAY_POLL_INTERVAL_MS: '250' } }).relay).toMatchObject({ workers: 8, pollIntervalMs: 250 });
    const error = thrown(() => loadConfig({ env: { OUTBOX_RELAY_BATCH_SIZE: '0' } }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('relay.batchSize');
    expect(error.message).toContain('OUTBOX_RELAY_BATCH_SIZE');
  });

  it('turns flags into settings, naming a flag whose value is not a whole number and what to pass', () => {
    expect(relayFlagSettings({ workers: '6', batchSize: '100', pollIntervalMs: '50', metricsHost: '0.0.0.0' })).toEqual({ workers: 6, batchSize: 100, pollIntervalMs: 50, metricsHost: '0.0.0.0' });
    const error = thrown(() => relayFlagSettings({ workers: 'four' }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('--workers "four"');
    expect(error.message).toContain('--workers 4');
    expect(thrown(() => relayFlagSettings({ pollIntervalMs: '1.5' })).message).toContain('--poll-interval-ms "1.5"');
  });

  it('range errors of flag values name the setting and the value', () => {
    const error = thrown(() => loadConfig({ env: {}, overrides: { relay: relayFlagSettings({ workers: '0' }) } }));
    expect(error.message).toContain('relay.workers');
    expect(error.message).toContain('got 0');
  });
});
