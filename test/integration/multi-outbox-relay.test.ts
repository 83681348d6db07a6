/**
 * `outbox relay` over two outboxes in two databases (docs/multi-outbox.md), on the real stack: one
 * process, one relay per outbox. West's database is cut (a TCP proxy in front of it refuses every
 * connection) when the relay starts: east's events are published all the same, and once west's database
 * is back its events follow, without a restart. /metrics carries each relay's series, labelled `outbox`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import { loadConfigWithSources, type NamedOutbox, type OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { collect } from '../support/consume';
import { freshDatabase, randomIdentifier, testKafka, testPostgresPort, type FreshDatabase } from '../support/stack-env';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { dropRolesAndTopics, randomRoleNames, rolesYaml } from '../support/shared-roles';
import { waitsUpTo } from '../support/until';

jest.setTimeout(240_000);
const until = waitsUpTo(120_000, 500);
const MAIN = join(PROJECT_ROOT, 'dist/cli/main.js');
const EVENTS = 20;

describe('outbox relay over two outboxes, one of them unreachable at start', () => {
  let east: FreshDatabase;
  let west: FreshDatabase;
  let proxy: TcpProxy;
  let dir: string;
  let configFile: string;
  let outboxes: NamedOutbox[];
  let prefix: string;
  const roles = randomRoleNames();

  beforeAll(async () => {
    east = await freshDatabase('relay_east');
    west = await freshDatabase('relay_west');
    proxy = await startTcpProxy(testPostgresPort());
    prefix = randomIdentifier('mr').replace(/_/g, '');
    dir = mkdtempSync(join(tmpdir(), 'outbox-multi-relay-'));
    configFile = join(dir, 'outbox.yaml');
    const connector = (name: string) => `{ name: ${prefix}-${name}, slotName: ${prefix}_${name}, topicPrefix: ${prefix}-${name}, topicReplacement: '${prefix}.${name}.\${routedByValue}' }`;
    writeFileSync(
      configFile,
      [
        `database: { database: ${east.name} }`,
        rolesYaml(roles),
        'relay: { pollIntervalMs: 200 }',
        'outboxes:',
        `  east: { connector: ${connector('east')} }`,
        // West through the proxy: the database the relay sees can be taken away and given back.
        `  west: { database: { database: ${west.name}, port: ${proxy.port} }, connector: ${connector('west')} }`,
        '',
      ].join('\n'),
    );
    outboxes = [...loadConfigWithSources({ file: configFile, env: {} }).outboxes];
    for (const { config } of outboxes) await provision(config);
  });

  afterAll(async () => {
    await proxy?.close();
    await east?.drop();
    await west?.drop();
    await dropRolesAndTopics(roles, prefix);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** EVENTS events on key k, written straight to the outbox's database (not through the proxy). */
  async function write(name: string, config: OutboxConfig): Promise<void> {
    const pool = createPool({ ...config.database, port: testPostgresPort() }, { max: 1 });
    const client = await pool.connect();
    const writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE });
    try {
      await client.query('BEGIN');
      await writer.writeEvents(client, Array.from({ length: EVENTS }, (_, seq) => ({ aggregateType: 'note', aggregateId: 'k', type: 'Noted', payload: { outbox: name, seq } })));
      await client.query('COMMIT');
    } finally {
      client.release();
      await pool.end();
    }
  }

  it("publishes east's events while west's database is cut, and west's once it is back", async () => {
    for (const { name, config } of outboxes) await write(name, config);
    proxy.cut();
    const child = spawn(process.execPath, [MAIN, '--log-format', 'json', 'relay', '--config', configFile, '--metrics-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    try {
      const seqs = (records: Array<{ value: Buffer }>) => records.map((r) => (JSON.parse(r.value.toString()) as { seq: number }).seq);
      const eastRecords = await collect([`${prefix}.east.note`], (rs) => rs.length >= EVENTS, 60_000);
      expect(seqs(eastRecords)).toEqual(Array.from({ length: EVENTS }, (_, i) => i));
      // West is still cut: nothing of it has been published.
      const admin = testKafka().admin();
      await admin.connect();
      const westTopic = `${prefix}.west.note`;
      const westPublished = async () => ((await admin.listTopics()).includes(westTopic) ? (await admin.fetchTopicOffsets(westTopic)).reduce((n, p) => n + Number(p.high), 0) : 0);
      expect(await westPublished()).toBe(0);
      const url = await until('the relay metrics URL in its log', () => /"metrics":"(http:[^"]+)"/.exec(log)?.[1]);
      expect(await (await fetch(url)).text()).toMatch(/outbox="east"/);

      proxy.restore();
      await until("west's events published after its database came back", westPublished, (n) => n >= EVENTS);
      await admin.disconnect();
      const westRecords = await collect([westTopic], (rs) => rs.length >= EVENTS, 60_000);
      expect(seqs(westRecords)).toEqual(Array.from({ length: EVENTS }, (_, i) => i));
    } catch (error) {
      throw new Error(`${(error as Error).message}\nthe relay's log:\n${log.slice(-3000)}`, { cause: error });
    } finally {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
    }
  });
});
