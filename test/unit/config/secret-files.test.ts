import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigWithSources } from '../../../src/config';
import { isOutboxError } from '../../../src/errors';

describe('secrets from files (<VARIABLE>_FILE)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-secret-'));
  const file = (name: string, content: string) => {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  };

  it('reads a secret from the file a _FILE variable names, without its trailing newline, and says where it came from', () => {
    const { config, sources } = loadConfigWithSources({
      env: { OUTBOX_KAFKA_SASL_MECHANISM: 'scram-sha-512', OUTBOX_KAFKA_SASL_USERNAME: 'outbox-router', OUTBOX_KAFKA_SASL_PASSWORD_FILE: file('kafka', 's3cret-from-file\n'), PGPASSWORD_FILE: file('pg', 'pg-from-file') },
    });
    expect(config.kafka.sasl.password).toBe('s3cret-from-file');
    expect(config.database.password).toBe('pg-from-file');
    expect(sources.get('kafka.sasl.password')).toEqual({ kind: 'env', name: 'OUTBOX_KAFKA_SASL_PASSWORD_FILE' });
  });

  it('refuses a secret set both ways, and names an unreadable file without any secret', () => {
    const both = (() => {
      try {
        loadConfigWithSources({ env: { PGPASSWORD: 'inline-secret', PGPASSWORD_FILE: file('pg2', 'file-secret') } });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(isOutboxError(both) && both.code).toBe('CONFIG_INVALID');
    expect((both as Error).message).toContain('Both PGPASSWORD and PGPASSWORD_FILE are set');
    expect((both as Error).message).not.toContain('inline-secret');
    expect(() => loadConfigWithSources({ env: { OUTBOX_CDC_PASSWORD_FILE: join(dir, 'missing') } })).toThrow(/Cannot read OUTBOX_CDC_PASSWORD_FILE .*missing/);
  });

  it('ignores _FILE for settings that are not secrets', () => {
    const { config } = loadConfigWithSources({ env: { PGHOST_FILE: file('host', 'db.example') } });
    expect(config.database.host).toBe('127.0.0.1');
  });
});
