import { benchCommand } from '../../../src/cli/bench-command';

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
    expect(String(stderr.mock.calls[1]?.[0])).toContain('--rates must be a positive integer, got NaN');
  });
});
