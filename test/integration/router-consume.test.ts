import { randomUUID } from 'node:crypto';
import { ConfigResourceTypes, type Consumer, type Kafka } from 'kafkajs';
import pino from 'pino';
import { isOutboxError } from '../../src/errors';
import { createRouter, type Handlers, type Router, type RouterOptions } from '../../src/router';
import { collect } from '../support/consume';
import { routerHarness } from '../support/router-scenario';
import { randomName, testKafka } from '../support/stack-env';

jest.setTimeout(120_000);

/**
 * The router's consume loop on the real stack: the dead-letter topics it creates, handlers that end the
 * inbox transaction themselves, heartbeats during slow chunks, a re-subscribe that fails, and the
 * start-up checks (topics pattern, unknown-event-type policy in the log), and the default subscription:
 * only the handlers' aggregate types, a missing one looked for every second.
 */
describe('router consume loop', () => {
  const h = routerHarness('router_consume');
  const { scenario, produce, handlers, startRouter, until, effects } = h;

  /** A Kafka client whose consumers count their group joins; `failConnectOf: n` makes the n-th consumer's subscribe fail. */
  function instrumentedKafka(options: { failConnectOf?: number; onInjectedFailure?: () => void } = {}) {
    const kafka = testKafka();
    const counts = { consumers: 0, joins: 0, injectedFailures: 0 };
    const wrapper = Object.assign(Object.create(kafka) as Kafka, {
      consumer: (config: Parameters<Kafka['consumer']>[0]): Consumer => {
        const consumer = kafka.consumer(config);
        counts.consumers++;
        consumer.on(consumer.events.GROUP_JOIN, () => void counts.joins++);
        if (counts.consumers === options.failConnectOf) {
          consumer.subscribe = async () => {
            counts.injectedFailures++;
            options.onInjectedFailure?.();
            throw new Error('injected: the broker refused the new consumer');
          };
        }
        return consumer;
      },
    });
    return { kafka: wrapper, counts };
  }

  async function retentionOf(topic: string): Promise<string | undefined> {
    const described = await h.admin.describeConfigs({ includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }] });
    return described.resources[0]?.configEntries.find((e) => e.configName === 'retention.ms')?.configValue;
  }

  async function partitionsOf(topic: string): Promise<number> {
    const { topics } = await h.admin.fetchTopicMetadata({ topics: [topic] });
    return topics[0]?.partitions.length ?? 0;
  }

  it('creates the dead-letter topic when it subscribes: infinite retention, the source topic’s partition count', async () => {
    const s = await scenario(3, { dlq: false });
    await startRouter(s, handlers(s));
    expect(await partitionsOf(s.dlq)).toBe(3);
    expect(await retentionOf(s.dlq)).toBe('-1');
  });

  describe('a handler that ends the transaction itself', () => {
    /** The harness's handler, then the given statement on ctx.tx for the records whose reason names one. */
    function ending(s: Parameters<typeof handlers>[0], calls: string[]): Handlers {
      const base = handlers(s);
      return {
        order: {
          OrderCancelled: async (event, ctx) => {
            const reason = (event.payload as { reason: string }).reason;
            calls.push(reason);
            await base.order?.OrderCancelled?.(event, ctx);
            // Savepoints are nested work inside the router's transaction: allowed.
            if (reason.startsWith('savepoint')) await ctx.tx.query('SAVEPOINT nested; RELEASE SAVEPOINT nested');
            if (reason.startsWith('commit')) await ctx.tx.query('COMMIT');
            // Ends the transaction and opens another: only the transaction id tells.
            if (reason.startsWith('recommit')) await ctx.tx.query('COMMIT; BEGIN');
            if (reason.startsWith('rollback')) await ctx.tx.query('ROLLBACK');
            // Commits behind the router's back, then fails: the rollback cannot take its inbox row back.
            if (reason.startsWith('late-fail')) {
              await ctx.tx.query('COMMIT; BEGIN');
              throw new Error('failed after its own COMMIT');
            }
          },
        },
      };
    }

    const letterCodes = async (dlq: string, n: number) =>
      (await collect([dlq], (rs) => rs.length >= n)).map((r) => [r.key, r.headers['x-error-code']]);

    it('is dead-lettered at once (HANDLER_ENDED_TRANSACTION), never counted as applied, in its own transaction', async () => {
      const s = await scenario(1);
      const calls: string[] = [];
      await produce(s, [
        { key: 'k1', reason: 'ok-1' },
        { key: 'k2', reason: 'commit' },
        { key: 'k3', reason: 'rollback' },
        { key: 'k4', reason: 'recommit' },
        { key: 'k5', reason: 'savepoint' },
      ]);
      const router = await startRouter(s, ending(s, calls), { maxTransactionRecords: 1, maxAttempts: 3 });
      await until('drained', () => router.stats(), (st) => st.applied + st.deadLettered === 5);
      expect(router.stats()).toMatchObject({ applied: 2, deadLettered: 3, duplicates: 0, retries: 0 });
      expect(calls).toEqual(['ok-1', 'commit', 'rollback', 'recommit', 'savepoint']); // not retried
      // The COMMIT made the handler's write stick; the ROLLBACK undid it. Neither is "applied".
      expect((await effects(s)).map((r) => r.reason)).toEqual(['ok-1', 'commit', 'recommit', 'savepoint']);
      expect(await letterCodes(s.dlq, 3)).toEqual([
        ['k2', 'HANDLER_ENDED_TRANSACTION'],
        ['k3', 'HANDLER_ENDED_TRANSACTION'],
        ['k4', 'HANDLER_ENDED_TRANSACTION'],
      ]);
    });

    it('a handler that commits and then fails is caught too: dead-lettered, never retried into a duplicate, its inbox row removed for the replay', async () => {
      for (const maxTransactionRecords of [1, 50]) {
        const s = await scenario(1);
        const calls: string[] = [];
        const sent = await produce(s, [
          { key: 'k1', reason: 'ok-1' },
          { key: 'k2', reason: 'late-fail' },
          { key: 'k3', reason: 'ok-3' },
        ]);
        const router = await startRouter(s, ending(s, calls), { maxTransactionRecords, maxAttempts: 3 });
        await until(`${maxTransactionRecords}: drained`, () => router.stats(), (st) => st.applied + st.duplicates + st.deadLettered === 3);
        const st = router.stats();
        // Never a silent duplicate: before the fix the retry found the handler's committed inbox row.
        expect(st.duplicates).toBe(0);
        const letters = await letterCodes(s.dlq, st.deadLettered);
        expect(letters).toContainEqual(['k2', 'HANDLER_ENDED_TRANSACTION']);
        expect(new Set(letters.map(([, code]) => code))).toEqual(new Set(['HANDLER_ENDED_TRANSACTION']));
        if (maxTransactionRecords === 1) expect(st).toMatchObject({ applied: 2, deadLettered: 1 });
        // In a chunk the culprit is unknown: every event whose row the handler committed is failed loudly.
        // Each dead-lettered event's inbox row is gone, so dlq:replay applies it after the fix.
        const inbox = await h.pool.query<{ message_id: string }>('SELECT message_id FROM inbox WHERE consumer = $1', [`c-${s.run}`]);
        const letteredIds = sent.filter((r) => letters.some(([key]) => key === r.key)).map((r) => r.id);
        for (const id of letteredIds) expect(inbox.rows.map((r) => r.message_id)).not.toContain(id);
        await router.stop();
      }
    });

    it('in a multi-record chunk: the other events of the chunk are applied exactly once, the culprit dead-lettered', async () => {
      for (const culprit of ['commit', 'rollback']) {
        const s = await scenario(1);
        const calls: string[] = [];
        const sent = await produce(
          s,
          ['a-0', 'a-1', culprit, 'a-3', 'a-4'].map((reason, i) => ({ key: `k${i}`, reason })),
        );
        const router = await startRouter(s, ending(s, calls), { maxTransactionRecords: 50 });
        await until(`${culprit}: drained`, () => router.stats(), (st) => st.applied + st.duplicates + st.deadLettered === 5);
        const st = router.stats();
        expect(st.deadLettered).toBe(1);
        expect(st.applied + st.duplicates).toBe(4);
        const rows = await effects(s);
        const others = sent.filter((r) => r.reason !== culprit).map((r) => r.id);
        for (const id of others) expect(rows.filter((r) => r.message_id === id)).toHaveLength(1);
        expect(calls.filter((c) => c === culprit)).toHaveLength(1);
        const inbox = await h.pool.query<{ message_id: string }>('SELECT message_id FROM inbox WHERE consumer = $1', [`c-${s.run}`]);
        expect(inbox.rows.map((r) => r.message_id).filter((id) => others.includes(id)).sort()).toEqual([...others].sort());
        expect(await letterCodes(s.dlq, 1)).toEqual([['k2', 'HANDLER_ENDED_TRANSACTION']]);
        await router.stop();
      }
    });
  });

  it('heartbeats through a chunk slower than the session timeout: two routers in one group, no rebalance, each event applied once', async () => {
    const s = await scenario(1);
    const { kafka, counts } = instrumentedKafka();
    const calls = new Map<string, number>();
    const base = handlers(s);
    const slow: Handlers = {
      order: {
        OrderCancelled: async (event, ctx) => {
          calls.set(event.id, (calls.get(event.id) ?? 0) + 1);
          await new Promise((r) => setTimeout(r, 300));
          await base.order?.OrderCancelled?.(event, ctx);
        },
      },
    };
    // 50 records × 300 ms in one transaction: 15 s, over twice the 6 s session timeout.
    const options = { kafka, groupId: `c-${s.run}`, sessionTimeoutMs: 6_000, maxTransactionRecords: 50 };
    const a = await startRouter(s, slow, options);
    const b = await startRouter(s, slow, options);
    await until('both members joined', () => counts.joins, (n) => n >= 3 && a.health().joined && b.health().joined);
    await new Promise((r) => setTimeout(r, 2_000)); // let the group settle
    const joinsBefore = counts.joins;
    const sent = await produce(s, Array.from({ length: 50 }, (_, i) => ({ key: `k${i % 5}`, reason: `r${i}` })));
    const total = () => [a.stats(), b.stats()].reduce((sum, st) => ({ applied: sum.applied + st.applied, duplicates: sum.duplicates + st.duplicates }), { applied: 0, duplicates: 0 });
    await until('50 applied', total, (t) => t.applied === 50, 90_000);
    expect(counts.joins).toBe(joinsBefore); // nobody was evicted, nothing moved mid-chunk
    expect(total()).toEqual({ applied: 50, duplicates: 0 });
    expect([...calls.values()].every((n) => n === 1) && calls.size === 50).toBe(true);
    expect(new Set((await effects(s)).map((r) => r.message_id))).toEqual(new Set(sent.map((r) => r.id)));
  });

  /** A routed topic created while the router runs (`<run>.outbox.event.payment`), with one PaymentTaken on it; returns its id. */
  async function newPaymentTopic(s: { run: string }, numPartitions: number): Promise<string> {
    const payment = `${s.run}.outbox.event.payment`;
    await h.admin.createTopics({ topics: [{ topic: payment, numPartitions }], waitForLeaders: true });
    const id = randomUUID();
    await h.producer.send({
      topic: payment,
      acks: -1,
      messages: [{ key: 'p1', value: Buffer.from('{"amount":5}'), headers: { id, eventType: 'PaymentTaken', contentType: 'application/json' } }],
    });
    return id;
  }

  it('retries a re-subscribe that fails, reporting unhealthy meanwhile, and then consumes the new topic', async () => {
    const s = await scenario(1);
    let router: Router | undefined;
    let healthDuringFailure: ReturnType<Router['health']> | undefined;
    // Consumer 1 is start()'s; consumer 2 is the first re-subscribe after the new topic appears.
    const { kafka, counts } = instrumentedKafka({ failConnectOf: 2, onInjectedFailure: () => (healthDuringFailure = router?.health()) });
    const seen: string[] = [];
    const h2: Handlers = { ...handlers(s), payment: { PaymentTaken: async (event) => void seen.push(event.id) } };
    router = await startRouter(s, h2, { kafka, topicRefreshMs: 300, infrastructureBackoff: { initialDelayMs: 50, maxDelayMs: 200 } });
    await until('joined', () => router?.health().joined, Boolean);

    const id = await newPaymentTopic(s, 2);
    await until('the new topic consumed', () => seen, (ids) => ids.includes(id), 60_000);
    expect(counts.injectedFailures).toBe(1);
    expect(healthDuringFailure).toEqual({ running: true, joined: false, waiting: [] });
    await until('healthy again', () => router?.health().joined, Boolean);
    // The new topic's dead-letter topic was created with it.
    expect(await partitionsOf(`${s.run}.outbox.dlq.payment`)).toBe(2);
    expect(await retentionOf(`${s.run}.outbox.dlq.payment`)).toBe('-1');
  });

  it('a re-subscribe is not held up by a partition blocked on an event type without a handler', async () => {
    const s = await scenario(1);
    const seen: string[] = [];
    const h2: Handlers = { ...handlers(s), payment: { PaymentTaken: async (event) => void seen.push(event.id) } };
    // `block` holds the order partition on this record until a router with its handler runs.
    await h.producer.send({
      topic: s.topic,
      acks: -1,
      messages: [{ key: 'o1', value: Buffer.from('{}'), headers: { id: '5f0e8d3a-2c1b-4a9e-8f7d-6e5c4b3a2918', eventType: 'NoSuchType', contentType: 'application/json' } }],
    });
    const router = await startRouter(s, h2, { unknownEventType: 'block', topicRefreshMs: 300 });
    await until('joined', () => router.health().joined, Boolean);
    await new Promise((r) => setTimeout(r, 1_000)); // the order partition is blocked by now
    const id = await newPaymentTopic(s, 1);
    // Before the fix the old consumer's disconnect waited forever for the blocked batch.
    await until('the new topic consumed while the order partition stays blocked', () => seen, (ids) => ids.includes(id), 45_000);
    // The handler ran inside the inbox transaction; the record counts once that commits.
    await until('applied', () => router.stats().applied, (n) => n >= 1);
    expect(router.stats().applied).toBe(1);
  });

  describe('by default, the topics of the aggregate types the handlers name', () => {
    /** h's config with routed topics named `<run>.outbox.event.<type>`: the default subscription is this test's own. */
    const named = (run: string) => ({ ...h.config, connector: { ...h.config.connector, topicReplacement: `${run}.outbox.event.\${routedByValue}` } });
    const json = (eventType: string, key: string) => ({ key, value: Buffer.from('{"n":1}'), headers: { id: randomUUID(), eventType, contentType: 'application/json' } });

    function defaultRouter(run: string, handlers: Handlers, extra: Partial<RouterOptions> = {}) {
      const events: Array<{ name: string; data: Record<string, unknown> }> = [];
      const router = createRouter({ config: named(run), handlers, consumer: `c-${run}`, logger: h.silent, onEvent: (name, data) => void events.push({ name, data }), ...extra });
      h.routers.push(router);
      return { router, events };
    }

    it('a router with handlers for one type, beside three other types with events, applies its own and dead-letters or parks nothing of the others', async () => {
      const run = randomName('only').replace(/-/g, '');
      const topic = (type: string) => `${run}.outbox.event.${type}`;
      const others = ['customer', 'shipment', 'invoice'];
      await h.admin.createTopics({ topics: ['order', ...others].map((type) => ({ topic: topic(type), numPartitions: 1 })), waitForLeaders: true });
      for (const type of others) await h.producer.send({ topic: topic(type), acks: -1, messages: [json('Created', `${type}-1`), json('Changed', `${type}-1`)] });
      const orders = [json('OrderPlaced', 'o-1'), json('OrderPlaced', 'o-2')];
      await h.producer.send({ topic: topic('order'), acks: -1, messages: orders });

      const applied: string[] = [];
      const { router, events } = defaultRouter(run, { order: { OrderPlaced: async (event) => void applied.push(event.id) } });
      await router.start();
      await until('its own events applied', () => applied, (ids) => ids.length === 2);
      expect(applied.sort()).toEqual(orders.map((m) => m.headers.id).sort());
      // Assigned only its own topic (before the fix: all four, each event of the others HANDLER_NOT_FOUND).
      const join = events.find((e) => e.name === 'router.group-join');
      expect(Object.keys((join?.data.assignment ?? {}) as Record<string, number[]>)).toEqual([topic('order')]);
      await router.stop();
      expect(router.stats()).toMatchObject({ received: 2, applied: 2, deadLettered: 0 });
      const existing = await h.admin.listTopics();
      expect(others.map((type) => `${run}.outbox.dlq.${type}`).filter((t) => existing.includes(t))).toEqual([]);
      const parked = await h.pool.query('SELECT aggregate_type FROM inbox_parked WHERE consumer = $1', [`c-${run}`]);
      expect(parked.rows).toEqual([]);
    });

    it('a topic that does not exist yet is looked for every second, not every topicRefreshMs: its first event is applied soon after it appears', async () => {
      const run = randomName('soon').replace(/-/g, '');
      const topic = `${run}.outbox.event.payment`;
      const applied: string[] = [];
      // A refresh far longer than the test: only the short check of the missing topic can subscribe it.
      const { router, events } = defaultRouter(run, { payment: { PaymentTaken: async (event) => void applied.push(event.id) } }, { topicRefreshMs: 600_000 });
      await router.start();
      expect(router.health()).toEqual({ running: true, joined: true, waiting: [] });
      await h.admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
      const first = json('PaymentTaken', 'p-1');
      await h.producer.send({ topic, acks: -1, messages: [first] });
      await until('the first event applied', () => applied, (ids) => ids.includes(first.headers.id), 30_000);
      expect(events.find((e) => e.name === 'router.topics-changed')?.data).toMatchObject({ added: [topic], by: 'missing-topic-check' });
    });
  });

  it('refuses a topics pattern that would read dead-letter topics, from samples and from the topics that exist', async () => {
    const s = await scenario(1);
    const refusal = (topics: RegExp) =>
      startRouter(s, handlers(s), { topics }).then(
        () => 'started',
        (error: unknown) => (isOutboxError(error) ? `${error.code}: ${error.message}` : String(error)),
      );
    expect(await refusal(/.*/)).toMatch(/^TOPIC_PATTERN_INVALID: The topics pattern \/\.\*\/ \(--topics\) matches dead-letter topics/);
    // Prefixed: no sample DLQ name matches, the existing `<run>.outbox.dlq.order` does.
    const prefixed = new RegExp(`^${s.run}\\.outbox\\.`);
    expect(await refusal(prefixed)).toMatch(new RegExp(`^TOPIC_PATTERN_INVALID: The topics pattern .* matches dead-letter topics \\(${s.run}\\.outbox\\.dlq\\.order\\)`));
  });

  it("logs the unknown-event-type policy at start-up", async () => {
    const s = await scenario(1);
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    await startRouter(s, handlers(s), { logger, unknownEventType: 'skip', unknownEventTypes: { payment: 'block' } });
    const started = lines.map((l) => JSON.parse(l) as { event?: string; msg: string; unknownEventType?: string }).find((l) => l.event === 'router.started');
    expect(started?.msg).toBe('router.started (event types without a handler: skip, payment: block)');
    expect(started?.unknownEventType).toBe('skip');
  });
});
