import { relayFlagSettings } from '../../../src/cli/relay-command';
import { loadConfig } from '../../../src/config';
import { buildRelaySql, lockNamespaces, recordBytes, recordFor, ROW_BYTES_EXPRESSION, SHARD_EXPRESSION, type OutboxRow } from '../../../src/relay';
import { thrown } from '../../support/expect-error';

describe('relay SQL', () => {
  const sql = buildRelaySql('my "schema"', 'out box');

  it('escapes the configured identifiers everywhere', () => {
    for (const text of [sql.check, sql.claim, sql.probe, sql.mark, sql.cleanup]) expect(text).toContain('"my ""schema"""."out box"');
  });

  it('claims by published_at IS NULL (never an id cursor), per shard, oldest first, FOR UPDATE SKIP LOCKED, under the shard lock', () => {
    expect(sql.claim).toContain('published_at IS NULL');
    expect(sql.claim).not.toMatch(/id\s*>\s*\$/);
    expect(sql.claim).toContain(`${SHARD_EXPRESSION} = $2`);
    expect(sql.claim).toContain('pg_try_advisory_xact_lock(hashtext($1), $2)');
    expect(sql.claim).toContain('NOT (aggregate_id = ANY($5::text[]))');
    expect(sql.claim).toContain('FOR UPDATE SKIP LOCKED');
  });

  it('orders by seq (assigned at insert), never by created_at (the transaction start)', () => {
    expect(sql.claim).not.toMatch(/ORDER BY [^)]*created_at/);
    expect(sql.claim).toContain('OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING)');
    expect(sql.claim).toContain('ORDER BY seq LIMIT $4)');
    expect(sql.claim).toMatch(/ORDER BY c\.seq$/);
    expect(sql.check).toContain('seq');
  });

  it('claims rows while the bytes before each stay under the budget ($6), so the first row always goes', () => {
    expect(sql.claim).toContain(`sum(${ROW_BYTES_EXPRESSION}) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - ${ROW_BYTES_EXPRESSION} AS bytes_before`);
    expect(sql.claim).toContain('WHERE bytes_before < $6::bigint');
  });

  it('drops a row whose aggregate has an earlier candidate that SKIP LOCKED passed over', () => {
    expect(sql.claim).toContain('skipped AS (SELECT aggregate_id, min(seq) AS seq FROM budget WHERE id NOT IN (SELECT id FROM claimed) GROUP BY aggregate_id)');
    expect(sql.claim).toContain('WHERE s.seq IS NULL OR c.seq < s.seq');
  });

  it('counts a row\'s bytes as recordBytes counts its record (the constants of the SQL expression)', () => {
    const row = (traceparent: string | null, headers: string | null): OutboxRow => ({
      id: '0190d0a8-0000-7000-8000-000000000000',
      aggregate_type: 't',
      aggregate_id: 'kéy',
      event_type: 'Happened',
      payload: Buffer.alloc(1000),
      content_type: 'application/json',
      traceparent,
      headers,
      created_at: new Date(0),
      attempts: 0,
    });
    // The SQL expression, evaluated by hand for a row: octet_length is Buffer.byteLength of the UTF-8 text.
    const sqlBytes = (r: OutboxRow) => {
      const len = (v: string) => Buffer.byteLength(v);
      const m = /^\((\d+) \+.*COALESCE\((\d+) \+ octet_length\(traceparent\), 0\) \+ COALESCE\((\d+) \+ octet_length\(headers\), 0\)\)::bigint$/.exec(ROW_BYTES_EXPRESSION);
      const [base, tp, hs] = (m as RegExpExecArray).slice(1).map(Number) as [number, number, number];
      return base + len(r.aggregate_id) + r.payload.length + len(r.event_type) + len(r.content_type) + (r.traceparent === null ? 0 : tp + len(r.traceparent)) + (r.headers === null ? 0 : hs + len(r.headers));
    };
    for (const r of [row(null, null), row('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', '{"tenant":"ü"}')]) {
      expect(sqlBytes(r)).toBe(recordBytes(recordFor(r, (t) => t)));
    }
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
    expect(loadConfig({ env: {} }).relay).toMatchObject({ workers: 4, batchSize: 500, maxBatchBytes: 16 * 1024 * 1024, pollIntervalMs: 100, metricsPort: 9466 });
  });

  it('reads maxBatchBytes from OUTBOX_RELAY_MAX_BATCH_BYTES and refuses a budget below one byte, naming it', () => {
    expect(loadConfig({ env: { OUTBOX_RELAY_MAX_BATCH_BYTES: '1048576' } }).relay.maxBatchBytes).toBe(1048576);
    const error = thrown(() => loadConfig({ env: { OUTBOX_RELAY_MAX_BATCH_BYTES: '0' } }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('relay.maxBatchBytes');
    expect(error.message).toContain('OUTBOX_RELAY_MAX_BATCH_BYTES');
  });

  it('reads OUTBOX_RELAY_* variables and names the variable of a bad value', () => {
    expect(loadConfig({ env: { OUTBOX_RELAY_WORKERS: '8', OUTBOX_RELAY_POLL_INTERVAL_MS: '250' } }).relay).toMatchObject({ workers: 8, pollIntervalMs: 250 });
    expect(loadConfig({ env: {} }).relay.notify).toBe(false); // CDC-only deployments get no trigger
    expect(loadConfig({ env: { OUTBOX_RELAY_NOTIFY: 'true' } }).relay.notify).toBe(true);
    expect(relayFlagSettings({ notify: true })).toEqual({ notify: true });
    const error = thrown(() => loadConfig({ env: { OUTBOX_RELAY_BATCH_SIZE: '0' } }));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('relay.batchSize');
    expect(error.message).toContain('OUTBOX_RELAY_BATCH_SIZE');
  });

  it('turns flags into settings, naming a flag whose value is not a whole number and what to pass', () => {
    expect(relayFlagSettings({ workers: '6', batchSize: '100', pollIntervalMs: '50', metricsHost: '0.0.0.0' })).toEqual({ workers: 6, batchSize: 100, pollIntervalMs: 50, metricsHost: '0.0.0.0' });
    expect(relayFlagSettings({ maxBatchBytes: '1048576' })).toEqual({ maxBatchBytes: 1048576 });
    const error = thrown(() => relayFlagSettings({ workers: 'four' }));
    expect(error.code).toBe('FLAG_INVALID');
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
