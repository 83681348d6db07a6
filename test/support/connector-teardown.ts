import type { OutboxConfig } from '../../src/config';
import { deleteConnector } from '../../src/connector';
import { testKafka, withClient, type FreshDatabase } from './stack-env';

/**
 * The afterAll of a test file that deployed connectors: each connector and its slot, the database, the
 * roles of the first config (the files share one set), and every topic whose name contains `topicPart`.
 * Each step goes on when another fails.
 */
export async function teardownConnectorTest(configs: readonly OutboxConfig[], db: FreshDatabase, topicPart: string): Promise<void> {
  for (const config of configs) {
    await deleteConnector(config, { dropSlot: true, force: true, timeoutMs: 30_000 }).catch((e) => process.stderr.write(`cleanup: ${e}\n`));
  }
  await db.drop();
  const roles = configs[0]?.roles;
  if (roles) {
    await withClient('postgres', async (c) => {
      for (const role of [roles.cdc, roles.app, roles.monitor, roles.router, roles.relay]) {
        await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
      }
    });
  }
  const admin = testKafka().admin();
  await admin.connect();
  const topics = (await admin.listTopics()).filter((t) => t.includes(topicPart));
  if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
  await admin.disconnect();
}
