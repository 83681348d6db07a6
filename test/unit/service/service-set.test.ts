/**
 * createServiceSet and mergeExpositions (src/service/service-set.ts): several services in one process,
 * one failing to start while the others run and it is retried; their metrics merged into one valid
 * exposition, each series labelled with its member. Real prom-client registries; the members are
 * stand-in services (the pure logic of the set is what is tested here; the watchdog and relay over
 * real outboxes are in test/integration/multi-outbox.test.ts).
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { createLogger } from '../../../src/log';
import { createLifecycle, createServiceSet, mergeExpositions, type ServiceMember } from '../../../src/service';

const logger = createLogger({ level: 'silent' });

function member(name: string, startFails: () => boolean, started: string[]): ServiceMember {
  const registry = new Registry();
  new Gauge({ name: 'outbox_thing_rows', help: 'Rows.', registers: [registry] }).set(name.length);
  const lifecycle = createLifecycle(name, {
    start: async () => {
      if (startFails()) throw new Error(`database of ${name} unreachable`);
      started.push(name);
    },
    stop: async () => {},
  });
  return {
    service: { start: () => lifecycle.start(), stop: () => lifecycle.stop(), status: () => lifecycle.status(), ready: () => lifecycle.status().state === 'running' },
    registry,
    health: () => ({ healthy: lifecycle.status().state === 'running', details: {} }),
  };
}

describe('createServiceSet', () => {
  it('runs the members that start, retries the one that does not, and is ready once all run', async () => {
    const started: string[] = [];
    let gammaDown = true;
    const set = createServiceSet({
      logger,
      label: 'outbox',
      retryStartMs: 50,
      members: ['alpha', 'beta', 'gamma'].map((name) => ({ name, create: () => member(name, () => name === 'gamma' && gammaDown, started) })),
    });
    await set.service.start();
    expect(started.sort()).toEqual(['alpha', 'beta']);
    expect(set.service.ready()).toBe(false);
    expect(set.service.readyDetails?.()).toEqual({ alpha: 'ready', beta: 'ready', gamma: 'database of gamma unreachable' });
    expect(set.health().healthy).toBe(false);
    const text = await set.registry.metrics();
    expect(text).toContain('outbox_thing_rows{outbox="alpha"} 5');
    expect(text).not.toContain('outbox="gamma"');

    gammaDown = false;
    for (let i = 0; i < 100 && !set.service.ready(); i++) await new Promise((r) => setTimeout(r, 20));
    expect(set.service.ready()).toBe(true);
    expect(await set.registry.metrics()).toContain('outbox_thing_rows{outbox="gamma"} 5');
    await set.service.stop();
    expect([...set.running().values()].every((m) => m.service.status().state === 'stopped')).toBe(true);
  });

  it('fails to start only when no member starts, naming each reason', async () => {
    const set = createServiceSet({ logger, label: 'outbox', retryStartMs: 10_000, members: ['a', 'b'].map((name) => ({ name, create: () => member(name, () => true, []) })) });
    await expect(set.service.start()).rejects.toThrow(/none of 2 outboxes started: a: database of a unreachable; b: database of b unreachable/);
  });
});

describe('mergeExpositions', () => {
  it('keeps one HELP and TYPE per family with every member’s samples under it, and the process metrics once', async () => {
    const texts = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const registry = new Registry();
        registry.setDefaultLabels({ outbox: name });
        new Counter({ name: 'outbox_relay_published_total', help: 'Published.', registers: [registry] }).inc(name === 'a' ? 2 : 3);
        new Gauge({ name: 'process_start_time_seconds', help: 'Start.', registers: [registry] }).set(100);
        return registry.metrics();
      }),
    );
    const merged = mergeExpositions(texts);
    expect(merged.match(/# TYPE outbox_relay_published_total counter/g)).toHaveLength(1);
    expect(merged.match(/# HELP outbox_relay_published_total/g)).toHaveLength(1);
    expect(merged).toContain('outbox_relay_published_total{outbox="a"} 2');
    expect(merged).toContain('outbox_relay_published_total{outbox="b"} 3');
    expect(merged.match(/^process_start_time_seconds/gm)).toHaveLength(1);
    // Every sample line sits under its own family's TYPE line.
    const lines = merged.split('\n');
    const typeAt = lines.findIndex((l) => l === '# TYPE outbox_relay_published_total counter');
    expect(lines[typeAt + 1]).toMatch(/^outbox_relay_published_total\{outbox="a"\}/);
    expect(lines[typeAt + 2]).toMatch(/^outbox_relay_published_total\{outbox="b"\}/);
  });
});
