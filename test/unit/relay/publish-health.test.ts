import { createPublishHealth } from '../../../src/relay/publish-health';
import { relayHealthBody } from '../../../src/relay';

describe('relay publish health (/healthz)', () => {
  const harness = () => {
    let clock = 0;
    const health = createPublishHealth({ unhealthyAfterMs: 10_000, now: () => clock });
    return { health, at: (t: number) => (clock = t) };
  };

  it('an idle relay, which never published, is healthy', () => {
    const { health, at } = harness();
    health.claimOk();
    at(1_000_000);
    expect(health.verdict()).toMatchObject({ healthy: true, reason: null, failingSince: null, lastPublishedAt: null });
  });

  it('is unhealthy once every publish has failed for unhealthyAfterMs, healthy again after one publish', () => {
    const { health, at } = harness();
    health.batch(5, 0);
    at(1_000);
    health.batch(0, 5);
    at(5_000);
    health.batch(0, 5);
    expect(health.verdict().healthy).toBe(true);
    at(11_000);
    const down = health.verdict();
    expect(down).toMatchObject({ healthy: false, failingSince: new Date(1_000).toISOString(), failedBatches: 2, lastPublishedAt: new Date(0).toISOString() });
    expect(down.reason).toContain('every publish failed');
    // empty claims (the failed keys wait out their backoff) do not end the streak
    health.batch(0, 0);
    health.claimOk();
    expect(health.verdict().healthy).toBe(false);
    health.batch(1, 4);
    expect(health.verdict()).toMatchObject({ healthy: true, failingSince: null, failedBatches: 0 });
  });

  it('a batch with some keys published is healthy (a poisoned key is a blocked key, not a broken relay)', () => {
    const { health, at } = harness();
    for (let t = 0; t <= 60_000; t += 1_000) {
      at(t);
      health.batch(t % 2000 === 0 ? 1 : 0, 1);
    }
    expect(health.verdict().healthy).toBe(true);
  });

  it('a backlog of 0 ends the streak: nothing is left to publish', () => {
    const { health, at } = harness();
    health.batch(0, 3);
    at(20_000);
    health.backlog(3);
    expect(health.verdict().healthy).toBe(false);
    health.backlog(0);
    expect(health.verdict().healthy).toBe(true);
  });

  it('claims failing on the database side for unhealthyAfterMs are unhealthy until one works', () => {
    const { health, at } = harness();
    health.claimFailed();
    at(9_000);
    health.claimFailed();
    expect(health.verdict().healthy).toBe(true);
    at(10_000);
    expect(health.verdict()).toMatchObject({ healthy: false, dbFailingSince: new Date(0).toISOString() });
    health.claimOk();
    expect(health.verdict().healthy).toBe(true);
  });

  it('relayHealthBody: healthy only while running and publishing', () => {
    const publishing = { healthy: false, reason: 'x', failingSince: null, failedBatches: 3, dbFailingSince: null, lastPublishedAt: null };
    const relay = (running: boolean, healthy: boolean) => ({ health: () => ({ running, workers: 1, listening: false, publishing: { ...publishing, healthy } }), stats: () => ({}) as never });
    expect(relayHealthBody(relay(true, true)).healthy).toBe(true);
    expect(relayHealthBody(relay(true, false)).healthy).toBe(false);
    expect(relayHealthBody(relay(false, true)).healthy).toBe(false);
    expect(relayHealthBody(relay(true, false)).details).toMatchObject({ publishing: { reason: 'x' } });
  });
});
