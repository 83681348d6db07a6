import { createWakeSignal, relayChannel } from '../../../src/relay/wake';
import { buildRelaySql } from '../../../src/relay';

describe('relay wake signal', () => {
  jest.useFakeTimers();
  afterAll(() => jest.useRealTimers());

  const settled = async <T>(p: Promise<T>) => {
    let value: { v: T } | undefined;
    void p.then((v) => (value = { v }));
    await jest.advanceTimersByTimeAsync(0);
    return value;
  };

  it('a sleeping worker wakes on wakeAll, long before its poll interval', async () => {
    const wake = createWakeSignal();
    const signal = new AbortController().signal;
    const a = wake.sleep(0, 30_000, signal);
    const b = wake.sleep(1, 30_000, signal);
    expect(await settled(a)).toBeUndefined();
    wake.wakeAll();
    expect(await settled(a)).toEqual({ v: true });
    expect(await settled(b)).toEqual({ v: true });
    expect(wake.wakes).toBe(1);
  });

  it('without a wake it sleeps the whole interval (the poll fallback)', async () => {
    const wake = createWakeSignal();
    const p = wake.sleep(0, 100, new AbortController().signal);
    await jest.advanceTimersByTimeAsync(99);
    expect(await settled(p)).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(await settled(p)).toEqual({ v: true });
  });

  it('a wake that finds a worker busy makes its next sleep return at once, once', async () => {
    const wake = createWakeSignal();
    const signal = new AbortController().signal;
    const first = wake.sleep(0, 10, signal); // the worker is known once it slept
    await jest.advanceTimersByTimeAsync(10);
    await first;
    wake.wakeAll(); // the worker is busy now (claiming)
    expect(await settled(wake.sleep(0, 30_000, signal))).toEqual({ v: true });
    expect(await settled(wake.sleep(0, 30_000, signal))).toBeUndefined();
  });

  it('an abort ends the sleep with false', async () => {
    const wake = createWakeSignal();
    const controller = new AbortController();
    const p = wake.sleep(0, 30_000, controller.signal);
    controller.abort();
    expect(await settled(p)).toEqual({ v: false });
    expect(await settled(wake.sleep(0, 30_000, controller.signal))).toEqual({ v: false });
  });
});

describe('relay channel', () => {
  it('is a short lower-case identifier per outbox table', () => {
    const a = relayChannel('public', 'outbox');
    expect(a).toMatch(/^outbox_relay_[0-9a-f]{16}$/);
    expect(relayChannel('public', 'outbox')).toBe(a);
    expect(relayChannel('other', 'outbox')).not.toBe(a);
    expect(relayChannel('s'.repeat(63), 't'.repeat(63)).length).toBeLessThanOrEqual(63);
  });

  it('the relay checks its trigger by schema, table and name, ignoring a disabled one', () => {
    const sql = buildRelaySql('public', 'outbox');
    expect(sql.notifyTrigger).toContain('n.nspname = $1 AND c.relname = $2 AND g.tgname = $3');
    expect(sql.notifyTrigger).toContain("g.tgenabled <> 'D'");
  });
});
