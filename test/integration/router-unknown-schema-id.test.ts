import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AVRO_CONTENT_TYPE, JSON_CONTENT_TYPE } from '../../src/codec';
import { qualified } from '../../src/db';
import { parkedTableName } from '../../src/provision/sql-files';
import { createRouterMetrics, type Router } from '../../src/router';
import { collect } from '../support/consume';
import { routerHarness, type Rec, type Scenario } from '../support/router-scenario';

jest.setTimeout(120_000);

/** The shortened router.unknownSchemaIdWaitMs of these tests. */
const WAIT_MS = 2_000;
const waitSettings = { unknownSchemaIdWaitMs: WAIT_MS, infrastructureBackoff: { initialDelayMs: 100, maxDelayMs: 500 } };

/** A value in the Confluent framing that names a schema id no registry here has, then junk. */
function strayAvro(): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(2_000_000_000 + Math.floor(Math.random() * 100_000_000), 1);
  return Buffer.concat([header, Buffer.from('not avro at all')]);
}

const avroHeaders = () => ({ id: randomUUID(), eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE });
const json = (key: string, reason: string): Rec => ({
  key,
  value: Buffer.from(JSON.stringify({ orderId: key, reason })),
  headers: { id: randomUUID(), eventType: 'OrderCancelled', contentType: JSON_CONTENT_TYPE, headers: JSON.stringify({ tenant: 'acme' }) },
});
/** 4 keys × 5 events, interleaved. */
const jsonEvents = (run: string) => Array.from({ length: 20 }, (_, i) => json(`${run}-k${i % 4}`, `r${i}`));

/**
 * The Confluent API's answers to GET /schemas/ids/{id}: forwarded to the real registry, or, once `lost`,
 * "no such schema" (404, error_code 40403) for every id, as an empty registry (a wrong one, or one that
 * lost its data) answers.
 */
async function registryStandIn(upstream: string, lost: boolean): Promise<{ url: string; lose(): void; close(): Promise<void> }> {
  const state = { lost };
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (state.lost) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error_code: 40403, message: 'Schema not found' }));
        return;
      }
      const answer = await fetch(`${upstream}${req.url ?? ''}`, { headers: { accept: 'application/json' } });
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
    })().catch((error: Error) => res.writeHead(502).end(error.message));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    lose: () => void (state.lost = true),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A record naming a schema id the registry does not know (router.unknownSchemaIdWaitMs, docs/router.md):
 * one stray record among records that decode is dead-lettered after the wait and its key parked, so its
 * partition moves; a registry that resolves nothing keeps the router waiting, visibly.
 */
describe('router: a schema id the registry does not know', () => {
  const h = routerHarness('router_unknown_id');
  const parked = (s: Scenario) =>
    h.pool.query(`SELECT aggregate_id, error_code FROM ${qualified('public', parkedTableName('inbox'))} WHERE consumer = $1 ORDER BY seq`, [`c-${s.run}`]).then((r) => r.rows as Array<{ aggregate_id: string; error_code: string }>);
  const gauge = async (metrics: ReturnType<typeof createRouterMetrics>, code: string) =>
    Number(new RegExp(`outbox_router_waiting_records\\{code="${code}"\\} (\\S+)`).exec(await metrics.registry.metrics())?.[1] ?? 0);

  it('one stray record among records that decode is dead-lettered after the wait, its key parked, everything else applied', async () => {
    const s = await h.scenario(1);
    // One partition: everything after the stray record waits behind it until it is set aside.
    const known = await h.produce(s, [{ key: `${s.run}-avro`, reason: 'known id' }]);
    await h.produce(s, [{ key: `${s.run}-stray`, value: strayAvro(), headers: avroHeaders() }]);
    const rest = await h.produce(s, [...jsonEvents(s.run), json(`${s.run}-stray`, 'behind the stray record')]);
    const metrics = createRouterMetrics();
    await h.startRouter(s, h.handlers(s), { ...waitSettings, onEvent: metrics.onEvent });

    const applied = known.length + rest.length - 1;
    await h.until(`${applied} events applied`, () => h.effects(s), (rows) => rows.length === applied);
    const letters = await collect([s.dlq], (records) => records.length === 2);
    expect(letters.map((l) => [l.key, l.headers['x-error-code']])).toEqual([
      [`${s.run}-stray`, 'SCHEMA_ID_UNKNOWN'],
      [`${s.run}-stray`, 'KEY_PARKED'],
    ]);
    expect(letters[0]?.headers['x-error-message']).toContain('which still resolves schema id');
    expect(await parked(s)).toEqual([
      { aggregate_id: `${s.run}-stray`, error_code: 'SCHEMA_ID_UNKNOWN' },
      { aggregate_id: `${s.run}-stray`, error_code: 'KEY_PARKED' },
    ]);
    const effects = await h.effects(s);
    expect(effects.filter((e) => e.aggregate_id === `${s.run}-stray`)).toEqual([]);
    expect(effects.map((e) => e.reason)).toEqual(['known id', ...rest.slice(0, -1).map((r) => JSON.parse(r.value.toString()).reason as string)]);
    // The wait is over: the gauge and /healthz show none.
    expect(await gauge(metrics, 'SCHEMA_ID_UNKNOWN')).toBe(0);
    expect(h.routers[0]?.health().waiting).toEqual([]);
  });

  it('a registry that resolves nothing (404 "no such schema" for every id) keeps the router waiting, visibly, past the wait: nothing is dead-lettered', async () => {
    const s = await h.scenario(1);
    const empty = await registryStandIn(h.config.registry.url, true);
    try {
      await h.produce(s, [...jsonEvents(s.run), { key: `${s.run}-avro`, reason: 'its schema is in the real registry only' }, json(`${s.run}-k0`, 'behind')]);
      const metrics = createRouterMetrics();
      const router: Router = await h.startRouter(s, h.handlers(s), { ...waitSettings, onEvent: metrics.onEvent, config: { ...h.config, registry: { ...h.config.registry, url: empty.url } } });
      await h.until('the JSON events before the Avro record applied', () => h.effects(s), (rows) => rows.length === 20);
      // Well past the wait: three times it.
      await h.until('the Avro record waiting for 3 × unknownSchemaIdWaitMs', () => router.health().waiting, (w) => (w[0]?.seconds ?? 0) > (3 * WAIT_MS) / 1000);
      expect(router.health().waiting).toMatchObject([{ topic: s.topic, partition: 0, key: `${s.run}-avro`, code: 'SCHEMA_ID_UNKNOWN' }]);
      // /readyz's body names the same wait (the router stays ready: it consumes every other partition).
      expect(router.readyDetails()).toMatchObject({ waiting: [{ topic: s.topic, partition: 0, code: 'SCHEMA_ID_UNKNOWN' }] });
      expect(await gauge(metrics, 'SCHEMA_ID_UNKNOWN')).toBe(1);
      expect(router.stats()).toMatchObject({ deadLettered: 0, applied: 20 });
      expect(await parked(s)).toEqual([]);
    } finally {
      await Promise.all(h.routers.splice(0).map((r) => r.stop()));
      await empty.close();
    }
  });

  it('a registry that lost the id the router read before keeps the router waiting on a new unknown id: nothing is dead-lettered', async () => {
    const s = await h.scenario(1);
    const standIn = await registryStandIn(h.config.registry.url, false);
    try {
      const waits: string[] = [];
      const router: Router = await h.startRouter(s, h.handlers(s), {
        ...waitSettings,
        config: { ...h.config, registry: { ...h.config.registry, url: standIn.url } },
        onEvent: (name, data) => void (name === 'router.wait' && waits.push(String(data.error))),
      });
      await h.produce(s, [{ key: `${s.run}-avro`, reason: 'read through the registry' }]);
      await h.until('the Avro record applied', () => h.effects(s), (rows) => rows.length === 1);
      standIn.lose();
      await h.produce(s, [{ key: `${s.run}-stray`, value: strayAvro(), headers: avroHeaders() }, json(`${s.run}-k0`, 'behind')]);
      await h.until('the stray record waiting for 3 × unknownSchemaIdWaitMs', () => router.health().waiting, (w) => (w[0]?.seconds ?? 0) > (3 * WAIT_MS) / 1000);
      expect(waits.at(-1)).toContain('before, is not found there now');
      expect(router.stats()).toMatchObject({ deadLettered: 0, applied: 1 });
      expect(await parked(s)).toEqual([]);
    } finally {
      await Promise.all(h.routers.splice(0).map((r) => r.stop()));
      await standIn.close();
    }
  });

  it('a record with two different id headers is dead-lettered as RECORD_INVALID, not applied under the first', async () => {
    const s = await h.scenario(1);
    const [first, second] = [randomUUID(), randomUUID()];
    await h.produce(s, [{ ...json(`${s.run}-twice`, 'two ids'), headers: { id: [first, second], eventType: 'OrderCancelled', contentType: JSON_CONTENT_TYPE } }, json(`${s.run}-k0`, 'after')]);
    await h.startRouter(s, h.handlers(s));
    const [letter] = await collect([s.dlq], (records) => records.length === 1);
    expect(letter?.headers['x-error-code']).toBe('RECORD_INVALID');
    expect(letter?.headers['x-error-message']).toContain('the id header 2 times with different values');
    await h.until('the record after it applied', () => h.effects(s), (rows) => rows.length === 1);
    expect((await h.effects(s)).map((e) => e.reason)).toEqual(['after']);
  });
});
