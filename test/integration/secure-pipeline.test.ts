/**
 * Every product path over the secure profile (`stack up --profile secure`): TLS with the server verified
 * on every hop, a credential on every hop, and Kafka ACLs from `outbox kafka:acls` for each principal.
 * The CLI runs as a user runs it, with its settings and secrets only in the environment, and nothing it
 * prints may contain a secret.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createConnectClient, deleteConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter } from '../../src/producer';
import { createRouter, type RoutedEvent, type Router } from '../../src/router';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { randomName } from '../support/stack-env';
import { waitsUpTo } from '../support/until';
import {
  applyAclsFor, certs, describeSecure, freshSecureDatabase, runCli, SECURE_ROLE_PASSWORDS, SECURE_SECRETS, secureConfig, secureEnv, secureKafka, type CliRun,
} from '../support/secure-env';

jest.setTimeout(240_000);

const until = waitsUpTo(90_000, 250);

function expectNoSecret(run: CliRun, what: string): void {
  const output = `${run.stdout}\n${run.stderr}`;
  const leaked = SECURE_SECRETS.filter((s) => output.includes(s) || output.includes(Buffer.from(s).toString('base64')));
  expect({ what, leaked }).toEqual({ what, leaked: [] });
}

function expectOk(run: CliRun, what: string): void {
  if (run.code !== 0) throw new Error(`${what} exited ${run.code}:\n${run.stderr.slice(-2000)}\n${run.stdout.slice(-1000)}`);
  expectNoSecret(run, what);
}

describeSecure('secure-pipeline')('the pipeline on the secure stack: TLS, credentials and ACLs on every hop', () => {
  let db: { name: string; drop(): Promise<void> };
  let prefix: string;
  let suffix: string;
  let config: OutboxConfig;
  let env: (principal: Parameters<typeof secureEnv>[1], extra?: Record<string, string>) => Record<string, string>;
  let pool: Pool;
  let router: Router | undefined;

  beforeAll(async () => {
    db = await freshSecureDatabase('secure');
    prefix = randomName('s').replace(/-/g, '');
    suffix = prefix.slice(-8);
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    const overrides = { connector: { topicReplacement, topicPrefix: prefix, slotName: `slot_${suffix}`, name: `conn-${suffix}` }, router: { consumer: `c-${prefix}` } };
    config = secureConfig(db.name, 'outbox-status', overrides, suffix);
    // What an operator does once: the ACLs this config's pipeline needs, from the config itself.
    expect(await applyAclsFor(config)).toBeGreaterThan(10);
    const roles = config.roles;
    env = (principal, extra = {}) => secureEnv(db.name, principal, {
      OUTBOX_CONNECTOR_TOPIC_REPLACEMENT: topicReplacement, OUTBOX_CONNECTOR_TOPIC_PREFIX: prefix, OUTBOX_SLOT_NAME: config.connector.slotName, OUTBOX_CONNECTOR_NAME: config.connector.name,
      OUTBOX_CDC_ROLE: roles.cdc, OUTBOX_APP_ROLE: roles.app, OUTBOX_MONITOR_ROLE: roles.monitor, OUTBOX_ROUTER_ROLE: roles.router, OUTBOX_RELAY_ROLE: roles.relay,
      OUTBOX_CDC_PASSWORD: SECURE_ROLE_PASSWORDS.cdc, OUTBOX_APP_PASSWORD: SECURE_ROLE_PASSWORDS.app, OUTBOX_MONITOR_PASSWORD: SECURE_ROLE_PASSWORDS.monitor,
      OUTBOX_ROUTER_PASSWORD: SECURE_ROLE_PASSWORDS.router, OUTBOX_RELAY_PASSWORD: SECURE_ROLE_PASSWORDS.relay,
      OUTBOX_ROUTER_CONSUMER: `c-${prefix}`,
      ...extra,
    });
  });

  afterAll(async () => {
    await router?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('db:provision, schemas:register and connector:deploy run from the environment over TLS; Debezium verifies PostgreSQL (verify-full) and Connect stores no password', async () => {
    expectOk(await runCli(['db:provision'], env('outbox-status')), 'db:provision');
    expectOk(await runCli(['schemas:register'], env('outbox-status')), 'schemas:register');
    expectOk(await runCli(['connector:deploy'], env('outbox-status')), 'connector:deploy');
    const connect = createConnectClient(config.connect);
    await until('the connector and its task RUNNING', async () => {
      const s = await connect.status(config.connector.name);
      return [s?.connector.state, ...(s?.tasks ?? []).map((t) => t.state)].join(',');
    }, (states) => states === 'RUNNING,RUNNING');
    const stored = await connect.getConfig(config.connector.name);
    expect(stored).toMatchObject({ 'database.sslmode': 'verify-full', 'database.sslrootcert': certs.caCert, 'database.password': '${env:OUTBOX_CDC_PASSWORD}' });
    expect(JSON.stringify(stored)).not.toContain(SECURE_ROLE_PASSWORDS.cdc);
  });

  it('an event written in the application\'s transaction is published by Debezium as User:outbox-connect and applied once by the router as User:outbox-router', async () => {
    pool = createPool(config.database, { max: 4 });
    await createEffectsTable(pool);
    const codec = createCodec({ registry: config.registry, autoRegister: false, topicFor: topicForReplacement(config.connector.topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec });
    const orderId = randomUUID();
    const client = await pool.connect();
    let id: string;
    try {
      await client.query('BEGIN');
      id = (await writer.writeEvent(client, { aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'secure', cancelledAt: new Date() } })).id;
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const topic = `${prefix}.outbox.event.order`;
    const admin = secureKafka('outbox-admin').admin();
    await admin.connect();
    try {
      await until(`topic ${topic} created by Connect`, () => admin.listTopics(), (t) => t.includes(topic));
    } finally {
      await admin.disconnect();
    }
    const seen: RoutedEvent[] = [];
    const routerConfig = secureConfig(db.name, 'outbox-router', { connector: { topicReplacement: config.connector.topicReplacement, topicPrefix: prefix }, router: { consumer: `c-${prefix}` } }, suffix);
    router = createRouter({ config: routerConfig, consumer: `c-${prefix}`, topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`), logger: createLogger({ level: 'silent' }), handlers: { order: { OrderCancelled: recordingHandler(seen) } } });
    await router.start();
    await until('the event applied', async () => router?.stats().applied ?? 0, (n) => n >= 1);
    expect(router.stats()).toMatchObject({ applied: 1, deadLettered: 0 });
    const effects = await pool.query('SELECT message_id, reason FROM effects');
    expect(effects.rows).toEqual([{ message_id: id, reason: 'secure' }]);
    const inbox = await pool.query('SELECT consumer, message_id FROM inbox');
    expect(inbox.rows).toEqual([{ consumer: `c-${prefix}`, message_id: id }]);
  });

  it('a dead letter written by the router is replayed by `dlq:replay` as User:outbox-dlq-replay and applied once', async () => {
    await router?.stop();
    const id = randomUUID();
    // A type with no handler yet: dead-lettered, its key parked.
    await pool.query(
      `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ($1, 'order', $2, 'OrderAudited', convert_to($3, 'UTF8'), 'application/json')`,
      [id, `audit-${prefix}`, JSON.stringify({ reason: 'audited' })],
    );
    const seen: RoutedEvent[] = [];
    const start = async (handlers: Parameters<typeof createRouter>[0]['handlers']) => {
      const routerConfig = secureConfig(db.name, 'outbox-router', { connector: { topicReplacement: config.connector.topicReplacement, topicPrefix: prefix }, router: { consumer: `c-${prefix}` } }, suffix);
      router = createRouter({ config: routerConfig, consumer: `c-${prefix}`, topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`), logger: createLogger({ level: 'silent' }), handlers });
      await router.start();
      return router;
    };
    let r = await start({ order: { OrderCancelled: recordingHandler(seen) } });
    await until('the event dead-lettered', async () => r.stats().deadLettered, (n) => n >= 1);
    await r.stop();
    r = await start({ order: { OrderCancelled: recordingHandler(seen), OrderAudited: recordingHandler(seen) } });
    const replay = await runCli(['dlq:replay', '--aggregate-type', 'order', '--consumer', `c-${prefix}`, '--follow-ms', '20000', '--json'], env('outbox-dlq-replay'));
    expectOk(replay, 'dlq:replay');
    await until('the replayed event applied', async () => (await pool.query('SELECT count(*)::int AS n FROM effects WHERE message_id = $1', [id])).rows[0].n as number, (n) => n >= 1);
    expect((await pool.query('SELECT reason FROM effects WHERE message_id = $1', [id])).rows).toEqual([{ reason: 'audited' }]);
  });

  it('outbox status and the watchdog read the slot, the connector and the topics as User:outbox-status, printing no secret; the secrets may come from files', async () => {
    // As Kubernetes mounts secrets: <VARIABLE>_FILE instead of the variable.
    const dir = mkdtempSync(join(tmpdir(), 'outbox-secrets-'));
    const fromFiles = Object.fromEntries(Object.entries(env('outbox-status')).map(([name, value]) => {
      if (!/PASSWORD$/.test(name)) return [name, value];
      writeFileSync(join(dir, name), `${value}\n`, { mode: 0o600 });
      return [`${name}_FILE`, join(dir, name)];
    }));
    expect(Object.keys(fromFiles)).toEqual(expect.arrayContaining(['PGPASSWORD_FILE', 'OUTBOX_KAFKA_SASL_PASSWORD_FILE', 'OUTBOX_CONNECT_PASSWORD_FILE', 'OUTBOX_REGISTRY_PASSWORD_FILE']));
    const status = await runCli(['status', '--json'], fromFiles);
    expectNoSecret(status, 'status');
    const report = JSON.parse(status.stdout) as { connector?: { state?: string }; [k: string]: unknown };
    expect(JSON.stringify(report)).toContain(config.connector.slotName);
    expect(JSON.stringify(report)).toContain('RUNNING');
    const watchdog = await runCli(['watchdog', '--once'], env('outbox-status'));
    expectNoSecret(watchdog, 'watchdog --once');
    expect([0, 1]).toContain(watchdog.code);
  });
});
