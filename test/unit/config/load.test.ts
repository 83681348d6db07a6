/**
 * src/config/load.ts and schema.ts: defaults, the precedence of the sources, validation messages
 * (which field, where it came from, never a secret), strictness, freezing and redaction.
 * No network, no database: files live in a temporary directory, env is an object passed in.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, redactConfig, type LoadConfigOptions } from '../../../src/config';
import { OutboxError, isOutboxError } from '../../../src/errors';

function configError(options: LoadConfigOptions): OutboxError {
  try {
    loadConfig(options);
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected loadConfig to throw an OutboxError, it returned a config');
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-config-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('defaults', () => {
  it('target the local stack when nothing is configured', () => {
    const config = loadConfig({ env: {} });
    expect(config.database).toEqual({
      host: '127.0.0.1',
      port: 55432,
      database: 'app',
      user: 'postgres',
      password: 'postgres',
      ssl: false,
      statementTimeoutMs: 30_000,
    });
    expect(config.registry.url).toBe('http://127.0.0.1:8081/apis/ccompat/v7');
    expect(config.connect.url).toBe('http://127.0.0.1:8083');
    expect(config.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(config.connector.passwordRef).toBe('${env:OUTBOX_CDC_PASSWORD}');
    expect(config.connector.slotName).toBe('outbox_slot');
    expect(config.outbox.schema).toBe('public');
    expect(config.outbox.table).toBe('outbox');
    // optional credentials stay absent rather than becoming empty strings
    expect(config.registry.password).toBeUndefined();
    expect(config.connect.username).toBeUndefined();
  });

  it('do not read process.env when an env object is passed', () => {
    const saved = process.env.PGPORT;
    process.env.PGPORT = '1234';
    try {
      expect(loadConfig({ env: {} }).database.port).toBe(55432);
    } finally {
      if (saved === undefined) delete process.env.PGPORT;
      else process.env.PGPORT = saved;
    }
  });
});

describe('precedence: defaults < file < env < overrides', () => {
  const yamlText = [
    'database:',
    '  host: file-host',
    '  port: 1111',
    '  user: file-user',
    '  database: file_db',
    'outbox:',
    '  table: file_outbox',
    '',
  ].join('\n');
  const env = { PGHOST: 'env-host', PGPORT: '2222' };
  const overrides = { database: { port: 3333 } };

  it.each([
    ['YAML', 'config.yaml', yamlText],
    [
      'JSON',
      'config.json',
      JSON.stringify({ database: { host: 'file-host', port: 1111, user: 'file-user', database: 'file_db' }, outbox: { table: 'file_outbox' } }),
    ],
  ])('%s file', (_kind, name, text) => {
    const path = file(name, text);

    const fileOnly = loadConfig({ file: path, env: {} });
    expect(fileOnly.database.port).toBe(1111);
    expect(fileOnly.database.host).toBe('file-host');

    const withEnv = loadConfig({ file: path, env });
    expect(withEnv.database.port).toBe(2222);
    expect(withEnv.database.host).toBe('env-host');

    const all = loadConfig({ file: path, env, overrides });
    expect(all.database.port).toBe(3333); // overrides win over env and file
    expect(all.database.host).toBe('env-host'); // env wins over file
    expect(all.database.user).toBe('file-user'); // file wins over defaults
    expect(all.database.database).toBe('file_db');
    expect(all.outbox.table).toBe('file_outbox');
    // merging is per field, not per section: untouched siblings keep their defaults
    expect(all.database.password).toBe('postgres');
    expect(all.outbox.schema).toBe('public');
  });

  it('treats an empty environment variable as unset', () => {
    expect(loadConfig({ env: { PGHOST: '', PGPASSWORD: '' } }).database).toMatchObject({ host: '127.0.0.1', password: 'postgres' });
  });

  it('an override of undefined does not erase a value from a lower source', () => {
    expect(loadConfig({ env: { PGHOST: 'env-host' }, overrides: { database: { host: undefined } } }).database.host).toBe('env-host');
  });
});

describe('environment parsing', () => {
  it('KAFKA_BROKERS is a comma-separated list, trimmed, empty items dropped', () => {
    expect(loadConfig({ env: { KAFKA_BROKERS: ' k1:9092, k2:9093 ,,k3:9094,' } }).kafka.brokers).toEqual(['k1:9092', 'k2:9093', 'k3:9094']);
  });

  it('KAFKA_BROKERS with only separators is rejected (no brokers), naming the variable', () => {
    const error = configError({ env: { KAFKA_BROKERS: ' , ,' } });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('kafka.brokers');
    expect(error.message).toContain('KAFKA_BROKERS');
  });

  it('numbers and booleans are converted', () => {
    const config = loadConfig({ env: { PGPORT: '6543', OUTBOX_DB_SSL: 'yes', OUTBOX_MAX_PAYLOAD_BYTES: '1024' } });
    expect(config.database.port).toBe(6543);
    expect(config.database.ssl).toBe(true);
    expect(config.outbox.maxPayloadBytes).toBe(1024);
    expect(loadConfig({ env: { OUTBOX_DB_SSL: 'off' } }).database.ssl).toBe(false);
  });

  it("PGPORT='abc' is CONFIG_INVALID naming database.port and PGPORT", () => {
    const error = configError({ env: { PGPORT: 'abc' } });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('database.port');
    expect(error.message).toContain('PGPORT');
    expect(error.message).toContain('"abc"');
    expect(error.details.fields).toEqual(['database.port']);
  });

  it('a boolean variable with an unknown word is rejected, naming it', () => {
    const error = configError({ env: { OUTBOX_DB_SSL: 'maybe' } });
    expect(error.message).toContain('database.ssl');
    expect(error.message).toContain('OUTBOX_DB_SSL');
  });

  // Every variable feeding its setting, derived ones included: test/unit/config/env.test.ts.
});

describe('validation errors', () => {
  it('a bad value in a file names the field and the file path', () => {
    const path = file('bad-port.yaml', 'database:\n  port: 70000\n');
    const error = configError({ file: path, env: {} });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('database.port');
    expect(error.message).toContain(path);
    expect(error.message).toContain('70000');
  });

  it('lists every invalid field in one error', () => {
    const path = file('several.yaml', 'registry:\n  url: not a url\n');
    const error = configError({
      file: path,
      env: { PGPORT: 'abc' },
      overrides: { connector: { slotName: 'Bad-Slot' }, outbox: { maxPayloadBytes: -1 } },
    });
    expect(error.code).toBe('CONFIG_INVALID');
    for (const field of ['database.port', 'registry.url', 'connector.slotName', 'outbox.maxPayloadBytes']) {
      expect(error.message).toContain(field);
    }
    expect([...(error.details.fields as string[])].sort()).toEqual(['connector.slotName', 'database.port', 'outbox.maxPayloadBytes', 'registry.url']);
    expect(error.message).toContain('PGPORT');
    expect(error.message).toContain(path);
  });

  it('names the source of the value that is actually invalid, not an earlier one it replaced', () => {
    // PGPORT is valid; the override (from code/CLI) is what fails, so the message must not blame PGPORT.
    const error = configError({ env: { PGPORT: '5432' }, overrides: { database: { port: 0 } } });
    expect(error.message).toContain('database.port');
    expect(error.message).not.toContain('PGPORT');
  });

  it('a bad password from a file is named but its value is never echoed', () => {
    const path = file('bad-password.yaml', 'database:\n  password: 987654321\n');
    const error = configError({ file: path, env: {} });
    expect(error.message).toContain('database.password');
    expect(error.message).toContain(path);
    expect(error.message).not.toContain('987654321');
  });

  it('an empty password override is rejected, naming the field', () => {
    const error = configError({ env: {}, overrides: { roles: { cdcPassword: '' } } });
    expect(error.message).toContain('roles.cdcPassword');
    expect(error.details.fields).toEqual(['roles.cdcPassword']);
  });

  it('rejects unknown keys at the top level and inside a section, naming them', () => {
    const top = configError({ env: {}, overrides: { databse: { port: 1 } } as never });
    expect(top.message).toContain('"databse"');
    const nested = configError({ file: file('unknown.yaml', 'database:\n  prot: 5432\n'), env: {} });
    expect(nested.message).toContain('"prot"');
    expect(nested.message).toContain('database');
  });

  it('an unknown key inside a section never echoes a password of that section', () => {
    const error = configError({ file: file('unknown-beside-secret.yaml', 'database:\n  password: s3cret-in-file\n  prot: 5432\n'), env: {} });
    expect(error.message).toContain('"prot"');
    expect(error.message).not.toContain('s3cret-in-file');
  });

  it('an unknown top-level key never echoes any password of the configuration', () => {
    const error = configError({ env: { PGPASSWORD: 's3cret-from-env' }, overrides: { extra: true } as never });
    expect(error.message).toContain('"extra"');
    expect(error.message).not.toContain('s3cret-from-env');
  });

  it('slotName: upper case or "-" is rejected with the PostgreSQL rule in the message', () => {
    for (const slotName of ['Outbox_Slot', 'outbox-slot']) {
      const error = configError({ env: {}, overrides: { connector: { slotName } } });
      expect(error.message).toContain('connector.slotName');
      expect(error.message).toContain('lower-case letters, digits and _ only');
    }
    expect(configError({ env: { OUTBOX_SLOT_NAME: 'UPPER' } }).message).toContain('OUTBOX_SLOT_NAME');
    expect(loadConfig({ env: {}, overrides: { connector: { slotName: 'outbox_slot_2' } } }).connector.slotName).toBe('outbox_slot_2');
  });

  it('a table name longer than 63 characters is rejected', () => {
    const error = configError({ env: {}, overrides: { outbox: { table: 'x'.repeat(64) } } });
    expect(error.message).toContain('outbox.table');
    expect(loadConfig({ env: {}, overrides: { outbox: { table: 'x'.repeat(63) } } }).outbox.table).toHaveLength(63);
  });
});

describe('config files that cannot be used', () => {
  it('a missing file is CONFIG_FILE_INVALID naming the path', () => {
    const path = join(dir, 'does-not-exist.yaml');
    const error = configError({ file: path, env: {} });
    expect(error.code).toBe('CONFIG_FILE_INVALID');
    expect(error.message).toContain(path);
  });

  it('an unreadable path (a directory: EISDIR even for root) is CONFIG_FILE_INVALID naming the path', () => {
    const path = mkdtempSync(join(dir, 'a-directory-'));
    const error = configError({ file: path, env: {} });
    expect(error.code).toBe('CONFIG_FILE_INVALID');
    expect(error.message).toContain(path);
    expect(error.message).toContain('Cannot read');
  });

  it.each([
    ['malformed YAML', 'bad.yaml', 'database: [unclosed\n  port: 1\n'],
    ['malformed JSON', 'bad.json', '{"database": {"port": 1,}'],
    ['a list at the top level', 'list.yaml', '- database\n- outbox\n'],
    ['a scalar at the top level', 'scalar.yaml', 'just a string\n'],
  ])('%s is CONFIG_FILE_INVALID naming the path', (_what, name, text) => {
    const path = file(name, text);
    const error = configError({ file: path, env: {} });
    expect(error.code).toBe('CONFIG_FILE_INVALID');
    expect(error.message).toContain(path);
  });

  it('a syntax error names the line and column but never echoes the line (it may hold a password)', () => {
    const path = file('secret.yaml', 'database:\n  host: db.internal\n  password: hunter2-s3cret: oops\n');
    const error = configError({ file: path, env: {} });
    expect(error.code).toBe('CONFIG_FILE_INVALID');
    expect(error.message).toContain(path);
    expect(error.message).toContain('at line 3, column');
    expect(error.message).not.toContain('hunter2');
    // --log-level debug prints the cause's stack: the parser's error quotes the line, so there is none.
    expect(error.cause).toBeUndefined();
    expect(JSON.stringify(error.details ?? {})).not.toContain('hunter2');
  });

  it('an empty file means defaults', () => {
    expect(loadConfig({ file: file('empty.yaml', ''), env: {} }).database.port).toBe(55432);
  });
});

describe('the result', () => {
  it('is deeply frozen', () => {
    const config = loadConfig({ env: {} });
    expect(Object.isFrozen(config)).toBe(true);
    for (const section of Object.values(config)) expect(Object.isFrozen(section)).toBe(true);
    expect(Object.isFrozen(config.kafka.brokers)).toBe(true);
    expect(() => {
      (config.database as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => {
      (config.kafka.brokers as string[]).push('x:1');
    }).toThrow(TypeError);
    expect(config.database.port).toBe(55432);
  });

  it('does not share mutable state between calls', () => {
    const a = loadConfig({ env: {} });
    const b = loadConfig({ env: { KAFKA_BROKERS: 'other:1' } });
    expect(a.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(b.kafka.brokers).toEqual(['other:1']);
  });
});

describe('redactConfig', () => {
  it('replaces password/secret/token values at any depth and keeps everything else', () => {
    const input = {
      name: 'keep',
      password: 'p0',
      nested: { deeper: { apiToken: 't1', clientSecret: 's1', DB_PASSWORD: 'p1', host: 'h' } },
      list: [{ password: 'p2', user: 'u' }, 'plain'],
      count: 3,
      missingPassword: undefined,
    };
    const out = redactConfig(input);
    expect(out).toEqual({
      name: 'keep',
      password: '[redacted]',
      nested: { deeper: { apiToken: '[redacted]', clientSecret: '[redacted]', DB_PASSWORD: '[redacted]', host: 'h' } },
      list: [{ password: '[redacted]', user: 'u' }, 'plain'],
      count: 3,
      missingPassword: undefined,
    });
    // a copy: the input is untouched
    expect(input.password).toBe('p0');
    expect(input.nested.deeper.apiToken).toBe('t1');
  });

  it('hides every password of a loaded config and nothing else', () => {
    const config = loadConfig({ env: { OUTBOX_REGISTRY_PASSWORD: 'reg-secret' } });
    const out = redactConfig(config);
    const text = JSON.stringify(out);
    // 'postgres' (the default password) is also the default user name, so it is checked field by field below
    for (const secret of ['outbox-cdc-local', 'outbox-app-local', 'outbox-monitor-local', 'reg-secret']) {
      expect(text).not.toContain(secret);
    }
    expect(out.database.password).toBe('[redacted]');
    expect(out.database.user).toBe('postgres');
    expect(out.roles.cdcPassword).toBe('[redacted]');
    expect(out.roles.cdc).toBe('outbox_cdc');
    expect(out.registry.password).toBe('[redacted]');
    expect(out.database.port).toBe(55432);
    expect(out.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(config.database.password).toBe('postgres');
  });
});
