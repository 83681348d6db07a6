/**
 * src/provision/sql-files.ts: the migration files as shipped, the directory rules, and rendering the
 * SQL with hostile configured names (every identifier must reach SQL escaped). Files only, no database.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { SQL_DIR, loadMigrations, pgObjectName, renderSql, rolesSql, sqlValues, statementsOf } from '../../../src/provision/sql-files';
import { thrown } from '../../support/expect-error';


const config = (overrides: OutboxOptions = {}) => loadConfig({ env: {}, overrides });

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-sql-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function migrationsDir(files: Record<string, string>): string {
  const d = mkdtempSync(join(dir, 'migrations-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return d;
}

describe('loadMigrations (shipped files)', () => {
  const migrations = loadMigrations();

  it('returns the migrations in order with their names', () => {
    expect(migrations.map((m) => [m.id, m.name])).toEqual([
      [1, 'outbox'],
      [2, 'inbox'],
      [3, 'heartbeat'],
      [4, 'publication'],
      [5, 'parked'],
      [6, 'relay_cleanup_index'],
      [7, 'outbox_order'],
      [8, 'outbox_limits'],
      [9, 'parked_head_index'],
      [10, 'inbox_retention'],
      [11, 'outbox_cleanup'],
      [12, 'outbox_cleanup_slot_identity'],
      [13, 'inbox_text_ids'],
      [14, 'topic_partitions'],
      [15, 'outbox_partitions'],
      [16, 'inbox_partitions'],
    ]);
  });

  it('carries each file as its template', () => {
    expect(migrations[0]?.template).toBe(readFileSync(join(SQL_DIR, 'migrations', '001_outbox.sql'), 'utf8'));
    expect(migrations[3]?.template).toContain('CREATE PUBLICATION');
  });

  it('has 16-hex checksums, distinct per file and stable across loads', () => {
    for (const m of migrations) expect(m.checksum).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(migrations.map((m) => m.checksum)).size).toBe(migrations.length);
    expect(loadMigrations().map((m) => m.checksum)).toEqual(migrations.map((m) => m.checksum));
  });
});

describe('loadMigrations (directory rules)', () => {
  it('a checksum depends on the template text only', () => {
    const a = loadMigrations(migrationsDir({ '001_a.sql': 'SELECT 1;\n' }));
    const same = loadMigrations(migrationsDir({ '001_other_name.sql': 'SELECT 1;\n' }));
    const changed = loadMigrations(migrationsDir({ '001_a.sql': 'SELECT 2;\n' }));
    expect(same[0]?.checksum).toBe(a[0]?.checksum);
    expect(changed[0]?.checksum).not.toBe(a[0]?.checksum);
  });

  it('a checksum covers the statements, not the comments; the whole-text checksum of earlier versions is kept as a former one', () => {
    const a = loadMigrations(migrationsDir({ '001_a.sql': '-- why\nSELECT 1;\n' }));
    const recommented = loadMigrations(migrationsDir({ '001_a.sql': '-- a better why\n\nSELECT 1;   \n-- and more\n' }));
    expect(recommented[0]?.checksum).toBe(a[0]?.checksum);
    expect(a[0]?.formerChecksums).toEqual([createHash('sha256').update('-- why\nSELECT 1;\n').digest('hex').slice(0, 16)]);
    expect(statementsOf('-- c\nCREATE TABLE t (\n  a int -- trailing comments stay\n);\n')).toBe('CREATE TABLE t (\n  a int -- trailing comments stay\n);');
  });

  it('the shipped 001 and 002 accept the whole-text checksums of 0.1.0, before their comments were corrected', () => {
    const shipped = loadMigrations();
    expect(shipped[0]?.formerChecksums).toContain('d929ddbda140d8c2');
    expect(shipped[1]?.formerChecksums).toContain('90e52d95750dca25');
  });

  it('ignores files that are not .sql', () => {
    const d = migrationsDir({ '001_a.sql': 'SELECT 1;', '002_b.sql': 'SELECT 2;', 'README.md': '# notes', '003_c.sql.bak': 'x' });
    expect(loadMigrations(d).map((m) => m.id)).toEqual([1, 2]);
  });

  it('a gap in the numbering is MIGRATION_FILES_INVALID naming the directory', () => {
    const d = migrationsDir({ '001_a.sql': 'SELECT 1;', '003_c.sql': 'SELECT 3;' });
    const error = thrown(() => loadMigrations(d));
    expect(error.code).toBe('MIGRATION_FILES_INVALID');
    expect(error.message).toContain(d);
    expect(error.message).toContain('found 3 at position 2');
  });

  it('not starting at 1 is MIGRATION_FILES_INVALID', () => {
    expect(thrown(() => loadMigrations(migrationsDir({ '002_b.sql': 'SELECT 2;' }))).code).toBe('MIGRATION_FILES_INVALID');
  });

  it.each(['outbox.sql', '001-outbox.sql', '001_Outbox.sql', '001_out box.sql'])('a badly named file %s is MIGRATION_FILES_INVALID naming it', (bad) => {
    const d = migrationsDir({ '001_a.sql': 'SELECT 1;', [bad]: 'SELECT 2;' });
    const error = thrown(() => loadMigrations(d));
    expect(error.code).toBe('MIGRATION_FILES_INVALID');
    expect(error.message).toContain(join(d, bad));
  });
});

describe('sqlValues', () => {
  it('escapes every configured name as a double-quoted identifier', () => {
    const values = sqlValues(
      config({
        outbox: { schema: 'we"ird', table: 'out"box', inboxTable: 'in box', heartbeatTable: 'hb', migrationsTable: 'mig', publication: 'pub"x' },
        roles: { cdc: 'c"dc', app: 'APP', monitor: 'mon' },
        database: { database: 'd"b' },
      }),
    );
    expect(values.schema).toBe('"we""ird"');
    expect(values.outbox).toBe('"we""ird"."out""box"');
    expect(values.inbox).toBe('"we""ird"."in box"');
    expect(values.heartbeat).toBe('"we""ird"."hb"');
    expect(values.migrations).toBe('"we""ird"."mig"');
    expect(values.publication).toBe('"pub""x"');
    expect(values.database).toBe('"d""b"');
    expect(values.cdcRole).toBe('"c""dc"');
    expect(values.appRole).toBe('"APP"'); // case is preserved, not folded
    expect(values.monitorRole).toBe('"mon"');
    expect(values.outboxUnpublishedIndex).toBe('"out""box_unpublished_idx"');
  });

  it('derives the index name within 63 characters for a 63-character table, distinct from the table', () => {
    const table = 't'.repeat(60) + 'end';
    const index = sqlValues(config({ outbox: { table } })).outboxUnpublishedIndex as string;
    expect(index.startsWith('"') && index.endsWith('"')).toBe(true);
    const name = index.slice(1, -1);
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name.endsWith('_unpublished_idx')).toBe(true);
    expect(name).not.toBe(table);
    expect(name.startsWith('t'.repeat(47))).toBe(true);
  });

  it('keeps the derived index name within PostgreSQL’s 63-byte limit for a multi-byte table name', () => {
    // PostgreSQL truncates identifiers at 63 *bytes*: 31 'é' (62 bytes) is a valid table name, and its
    // derived index name must be cut by bytes, on a character boundary, to stay distinct and valid.
    const table = 'é'.repeat(31);
    const index = (sqlValues(config({ outbox: { table } })).outboxUnpublishedIndex as string).slice(1, -1);
    expect(Buffer.byteLength(index, 'utf8')).toBeLessThanOrEqual(63);
    expect(index.endsWith('_unpublished_idx')).toBe(true);
    expect(index).not.toContain('\uFFFD');
  });

  it('rejects a table name over 63 bytes, counting bytes rather than characters (regression)', () => {
    expect(() => config({ outbox: { table: 'é'.repeat(32) } })).toThrow(/outbox\.table: at most 63 bytes/);
  });
});

describe('pgObjectName (names PostgreSQL chose itself)', () => {
  it('is name1_name2_label when it fits', () => {
    expect(pgObjectName('outbox', 'aggregate_type', 'check')).toBe('outbox_aggregate_type_check');
    expect(pgObjectName('inbox_parked', 'seq', 'seq')).toBe('inbox_parked_seq_seq');
  });

  it('shortens the longer name first, by bytes on a character boundary, to 63 bytes', () => {
    expect(pgObjectName('t'.repeat(63), 'aggregate_type', 'check')).toBe(`${'t'.repeat(42)}_aggregate_type_check`);
    const multiByte = pgObjectName('é'.repeat(31), 'seq', 'seq');
    expect(Buffer.byteLength(multiByte)).toBeLessThanOrEqual(63);
    expect(multiByte).toBe(`${'é'.repeat(27)}_seq_seq`);
  });
});

describe('rendering every SQL file with hostile names', () => {
  // Each name carries the marker "zq", which no template contains: it must never appear outside a
  // double-quoted identifier. The quote, semicolon, comment and placeholder syntax try to break out.
  const hostile = {
    schema: 'zq_sch"ema; DROP SCHEMA public --',
    table: 'zq_tab"le${outbox}',
    inboxTable: 'zq_inb"ox) --',
    heartbeatTable: "zq_hea\"rt'beat",
    migrationsTable: 'zq_mig"rations',
    publication: 'zq_pub"lication',
    database: 'zq_dat"abase',
    cdc: 'zq_cdc"role',
    app: 'zq_app"role',
    monitor: 'zq_mon"role',
    router: 'zq_rou"ter',
    relay: 'zq_rel"ay',
  };
  const cfg = config({
    database: { database: hostile.database },
    outbox: {
      schema: hostile.schema,
      table: hostile.table,
      inboxTable: hostile.inboxTable,
      heartbeatTable: hostile.heartbeatTable,
      migrationsTable: hostile.migrationsTable,
      publication: hostile.publication,
    },
    roles: { cdc: hostile.cdc, app: hostile.app, monitor: hostile.monitor, router: hostile.router, relay: hostile.relay },
  });
  const allowedNames = new Set([
    ...Object.values(hostile),
    `${hostile.table}_unpublished_idx`,
    `${hostile.table}_published_idx`,
    `${hostile.table}_aggregate_type_check`,
    `${hostile.inboxTable}_parked`,
    `${hostile.inboxTable}_parked_seq_seq`,
    `${hostile.inboxTable}_processed_idx`,
    `${hostile.inboxTable}_message_ms`,
    `${hostile.inboxTable}_message_ms_check`,
    `${hostile.inboxTable}_partition_add`,
    `${hostile.inboxTable}_partition_drop`,
    `${hostile.table}_cleanup`,
    `${hostile.table}_cleanup_marks`,
    `${hostile.table}_cleanup_slots`,
    `${hostile.table}_cleanup_registrations`,
    `${hostile.table}_topic_partitions`,
    `${hostile.table}_cleanup_below_floor`,
    `${hostile.table}_tx_id_idx`,
    `${hostile.table}_partitions`,
  ]);

  const rendered: Array<[string, string]> = [
    ...loadMigrations().map((m): [string, string] => [`${m.id}_${m.name}`, renderSql(m.template, cfg, m.name)]),
    ['roles.sql', rolesSql(cfg)],
  ];

  it.each(rendered)('%s leaves no placeholder and no raw name outside double quotes', (_file, sql) => {
    // A small SQL lexer: double-quoted identifiers, single-quoted literals and -- comments, leftmost first
    // (so a "--" or "'" inside a quoted identifier stays part of it, and quotes in comments are not names).
    const tokens = [...sql.matchAll(/"(?:[^"]|"")*"|'(?:[^']|'')*'|--[^\n]*/g)].map((m) => m[0]);
    const outside = sql.replace(/"(?:[^"]|"")*"|'(?:[^']|'')*'|--[^\n]*/g, ' ');
    // placeholders are gone (the hostile table name itself contains "${outbox}", but only inside quotes)
    expect(outside).not.toContain('${');
    // quotes are balanced: every " belongs to a complete quoted identifier
    expect(outside).not.toContain('"');
    expect(outside).not.toContain("'");
    // every quoted identifier is one of the configured names, correctly escaped
    const identifiers = tokens.filter((t) => t.startsWith('"')).map((t) => t.slice(1, -1).replace(/""/g, '"'));
    expect(identifiers.length).toBeGreaterThan(0);
    expect(identifiers.filter((id) => !allowedNames.has(id))).toEqual([]);
    // no configured name hides in a literal or a comment either, but for the inbox's and the parked
    // table's qualified names escaped as whole literals (migration 014's functions look them up at run time)
    const values = sqlValues(cfg);
    const literals = new Set([values.inboxLiteral, values.parkedLiteral]);
    expect(tokens.filter((t) => !t.startsWith('"') && t.includes('zq') && !literals.has(t))).toEqual([]);
    // no fragment of a hostile name escaped into the SQL text
    expect(outside).not.toContain('zq');
    expect(outside).not.toContain('DROP SCHEMA');
  });

  it('refuses a name that would end the dollar-quoted function body of migration 011', () => {
    const m11 = loadMigrations().find((m) => m.id === 11)!;
    const evil = loadConfig({ env: {}, overrides: { outbox: { table: 'x$fn$; DROP TABLE y; --' } } });
    expect(() => renderSql(m11.template, evil, m11.name)).toThrow(/\$fn\$/);
  });

  it('every configured name the file uses appears in its escaped form', () => {
    const text = Object.fromEntries(rendered);
    const esc = (s: string) => `"${s.replace(/"/g, '""')}"`;
    const outbox = `${esc(hostile.schema)}.${esc(hostile.table)}`;
    expect(text['1_outbox']).toContain(`CREATE TABLE ${outbox}`);
    expect(text['1_outbox']).toContain(`CREATE INDEX ${esc(`${hostile.table}_unpublished_idx`)} ON ${outbox}`);
    expect(text['2_inbox']).toContain(`CREATE TABLE ${esc(hostile.schema)}.${esc(hostile.inboxTable)}`);
    expect(text['3_heartbeat']).toContain(`INSERT INTO ${esc(hostile.schema)}.${esc(hostile.heartbeatTable)}`);
    expect(text['4_publication']).toContain(`CREATE PUBLICATION ${esc(hostile.publication)} FOR TABLE ${outbox}, ${esc(hostile.schema)}.${esc(hostile.heartbeatTable)}`);
    const roles = text['roles.sql'] as string;
    // Attributes and pg_monitor are set in code (src/provision/role-setup.ts), only where they differ.
    expect(roles).not.toContain('ALTER ROLE');
    expect(roles).toContain(`GRANT CONNECT ON DATABASE ${esc(hostile.database)} TO ${esc(hostile.cdc)}, ${esc(hostile.app)}, ${esc(hostile.monitor)}`);
    expect(roles).toContain(`GRANT USAGE ON SCHEMA ${esc(hostile.schema)} TO`);
    expect(roles).toContain(`GRANT USAGE ON SEQUENCE ${esc(hostile.schema)}.${esc(`${hostile.inboxTable}_parked_seq_seq`)} TO ${esc(hostile.router)}`);
    expect(roles).toContain(`GRANT UPDATE (published_at, attempts) ON ${outbox} TO ${esc(hostile.relay)}`);
    expect(text['8_outbox_limits']).toContain(`ALTER TABLE ${outbox} DROP CONSTRAINT IF EXISTS ${esc(`${hostile.table}_aggregate_type_check`)}`);
  });

  it('an unknown placeholder in a template is TEMPLATE_VALUE_MISSING naming the source', () => {
    const error = thrown(() => renderSql('SELECT * FROM ${nope};', cfg, 'custom.sql'));
    expect(error.code).toBe('TEMPLATE_VALUE_MISSING');
    expect(error.message).toContain('${nope}');
    expect(error.message).toContain('custom.sql');
  });
});
