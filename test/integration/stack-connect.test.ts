import axios from 'axios';
import { DEBEZIUM_PLUGIN_CLASSES, STACK_VERSIONS, stackUrls } from '../../scripts/stack/settings';

describe('native stack: Kafka Connect with Debezium', () => {
  it(`runs Kafka Connect ${STACK_VERSIONS.kafka} in distributed mode`, async () => {
    const { data } = await axios.get<{ version: string; kafka_cluster_id: string }>(`${stackUrls.connect}/`);
    expect(data.version).toBe(STACK_VERSIONS.kafka);
    expect(data.kafka_cluster_id).toBeTruthy();
  });

  it('lists the PostgreSQL connector, the Outbox Event Router and the BinaryDataConverter', async () => {
    const { data } = await axios.get<Array<{ class: string; type: string; version: string }>>(`${stackUrls.connect}/connector-plugins`, {
      params: { connectorsOnly: false },
    });
    for (const cls of DEBEZIUM_PLUGIN_CLASSES) {
      const plugin = data.find((p) => p.class === cls);
      expect(plugin).toBeDefined();
      expect(plugin?.version).toBe(STACK_VERSIONS.debezium);
    }
    expect(data.find((p) => p.class === DEBEZIUM_PLUGIN_CLASSES[0])?.type).toBe('source');
    expect(data.find((p) => p.class === DEBEZIUM_PLUGIN_CLASSES[1])?.type).toBe('transformation');
  });

  it('loads the connector class: validation reports a bad plugin.name by field', async () => {
    const { data } = await axios.put<{ error_count: number; configs: Array<{ value: { name: string; errors: string[] } }> }>(
      `${stackUrls.connect}/connector-plugins/PostgresConnector/config/validate`,
      {
        'connector.class': DEBEZIUM_PLUGIN_CLASSES[0],
        'topic.prefix': 'smoke',
        'database.hostname': '127.0.0.1',
        'database.user': 'nobody',
        'database.dbname': 'app',
        'plugin.name': 'no-such-decoder',
      },
    );
    expect(data.error_count).toBeGreaterThan(0);
    const pluginName = data.configs.find((c) => c.value.name === 'plugin.name');
    expect(pluginName?.value.errors.join(' ')).toMatch(/no-such-decoder|plugin/i);
  });
});

describe('Connect REST client: connect.fallbackUrls', () => {
  // A worker that does not answer (nothing listens on this port), then the real one: the client must reach
  // the real worker. Without the fallback every call failed with CONNECT_UNREACHABLE.
  it('answers from the next worker when connect.url is dead, and stays with the one that answered', async () => {
    const { createConnectClient } = await import('../../src/connector/connect-client');
    const net = await import('node:net');
    const dead = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const client = createConnectClient({ url: `http://127.0.0.1:${dead}`, fallbackUrls: [stackUrls.connect], requestTimeoutMs: 5_000 });
    expect(Array.isArray(await client.list())).toBe(true);
    expect(Array.isArray(await client.list())).toBe(true);
    const alone = createConnectClient({ url: `http://127.0.0.1:${dead}`, requestTimeoutMs: 5_000 });
    await expect(alone.list()).rejects.toMatchObject({ code: 'CONNECT_UNREACHABLE' });
  });
});
