import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigWithSources } from '../../../src/config';
import { describeConfig, renderConfigText } from '../../../src/config/describe';

describe('outbox config print', () => {
  const dir = mkdtempSync(join(tmpdir(), 'config-print-'));
  const file = join(dir, 'outbox.yaml');
  writeFileSync(file, 'router:\n  lanes: 3\nkafka:\n  sasl:\n    mechanism: plain\n    username: svc\n    password: file-secret-pw\n');
  const env = {
    PGPASSWORD: 'env-secret-pw',
    OUTBOX_ROUTER_CONSUMER: 'billing',
    OUTBOX_CONNECT_URL: 'https://admin:connect-secret-pw@connect.internal:8083',
    OUTBOX_WATCHDOG_WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 9).toString('base64')}`,
  };
  const settings = describeConfig(loadConfigWithSources({ file, env, overrides: { relay: { workers: 2 } }, flagNames: { 'relay.workers': '--workers' } }));
  const byPath = new Map(settings.map((s) => [s.path, s]));

  it('prints every setting with its source: default, env var, file or flag', () => {
    expect(byPath.get('router.consumer')).toEqual({ path: 'router.consumer', value: 'billing', source: 'env OUTBOX_ROUTER_CONSUMER' });
    expect(byPath.get('router.lanes')).toEqual({ path: 'router.lanes', value: 3, source: `file ${file}` });
    expect(byPath.get('relay.workers')).toEqual({ path: 'relay.workers', value: 2, source: 'flag --workers' });
    expect(byPath.get('router.maxTransactionRecords')).toEqual({ path: 'router.maxTransactionRecords', value: 500, source: 'default' });
    expect(byPath.get('kafka.brokers')?.value).toEqual(['127.0.0.1:9092']);
  });

  it('never prints a secret: passwords, webhook secrets and URL credentials are redacted', () => {
    const text = renderConfigText(settings) + JSON.stringify(settings);
    for (const secret of ['env-secret-pw', 'file-secret-pw', 'connect-secret-pw', env.OUTBOX_WATCHDOG_WEBHOOK_SECRET]) expect(text).not.toContain(secret);
    expect(byPath.get('database.password')).toEqual({ path: 'database.password', value: '[redacted]', source: 'env PGPASSWORD' });
    expect(byPath.get('kafka.sasl.password')?.value).toBe('[redacted]');
    expect(byPath.get('watchdog.webhookSecret')?.value).toBe('[redacted]');
    expect(text).toContain('database.password');
  });

  it('the text form is one aligned line per setting', () => {
    const lines = renderConfigText(settings).trimEnd().split('\n');
    expect(lines).toHaveLength(settings.length);
    expect(lines.find((l) => l.startsWith('router.consumer '))).toMatch(/^router\.consumer +=  ?"billing" {2}\(env OUTBOX_ROUTER_CONSUMER\)$/);
  });
});
