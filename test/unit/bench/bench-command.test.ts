import { benchCommand, benchSettings, QUICK } from '../../../scripts/bench/command';

describe('outbox bench: argument checks (before anything runs)', () => {
  let stderr: jest.SpyInstance;
  beforeEach(() => {
    stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => {
    stderr.mockRestore();
    process.exitCode = 0;
  });

  it('refuses an unknown part in --only, naming the valid ones', async () => {
    await benchCommand().parseAsync(['--only', 'cdc,nope'], { from: 'user' });
    expect(process.exitCode).toBe(2);
    expect(String(stderr.mock.calls[0]?.[0])).toContain('writer, cdc, relay, raw, router, watchdog; got nope');
  });

  it('refuses a non-positive --seconds or rate', async () => {
    await benchCommand().parseAsync(['--seconds', '0'], { from: 'user' });
    expect(process.exitCode).toBe(2);
    await benchCommand().parseAsync(['--rates', '500,abc'], { from: 'user' });
    expect(process.exitCode).toBe(2);
    expect(String(stderr.mock.calls[1]?.[0])).toContain('--rates must be a whole number ≥ 1, got NaN');
  });

  it('--quick shortens every length that was not given explicitly', () => {
    const flags = { only: ['cdc'], quick: true, seconds: 15, warmupSeconds: 20, rates: [100, 200], probes: 2, writerMode: 'sql' as const, writerConnections: 16, handlers: ['per-event' as const], idleSeconds: 30, writerSeconds: 9, concurrency: 8, routerEvents: 20000, exactlyOnce: false, output: 'x' };
    const quick = benchSettings(flags, (key) => key !== 'seconds');
    expect(quick).toMatchObject({ seconds: 15, warmupSeconds: QUICK.warmupSeconds, rates: [...QUICK.rates], probes: 0, routerEvents: QUICK.routerEvents });
    // The quick profile's curves are the per-event form's, the one `results.cdc` and `results.relay` hold.
    expect(benchSettings({ ...flags, handlers: ['batch'] }, (key) => key !== 'seconds')).toMatchObject({ handlers: ['per-event'] });
    expect(benchSettings({ ...flags, quick: false }, () => true)).toMatchObject({ seconds: 15, rates: [100, 200] });
    expect(benchSettings({ ...flags, warmupSeconds: -1 }, () => false)).toBe('--warmup-seconds must be a whole number ≥ 0, got -1');
  });

  it('--help names every flag', () => {
    const help = benchCommand().helpInformation();
    for (const flag of ['--only', '--quick', '--seconds', '--warmup-seconds', '--rates', '--probes', '--writer-mode', '--writer-connections', '--handlers', '--idle-seconds', '--writer-seconds', '--concurrency', '--router-events', '--output']) expect(help).toContain(flag);
  });
});
