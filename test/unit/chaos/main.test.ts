/** scripts/chaos/main.ts: flags are refused (FLAG_INVALID) before anything runs or restarts a service. */
import { program } from '../../../scripts/chaos/main';
import { isOutboxError, type OutboxError } from '../../../src/errors';

/** The OutboxError parsing `args` throws (an argument parser) or the action prints (its body). */
async function refusal(args: string[]): Promise<{ error?: OutboxError; printed: string }> {
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  try {
    await program().exitOverride().parseAsync(args, { from: 'user' });
    return { printed: stderr.mock.calls.map((c) => String(c[0])).join('') };
  } catch (error) {
    if (!isOutboxError(error)) throw error;
    return { error, printed: '' };
  } finally {
    stderr.mockRestore();
  }
}

describe('outbox-chaos flags', () => {
  afterEach(() => {
    process.exitCode = undefined;
  });

  it('--pipeline other than cdc, relay or cdc,relay is FLAG_INVALID, exit code 1', async () => {
    const { printed } = await refusal(['--pipeline', 'cdc,kafka']);
    expect(printed).toBe('outbox: --pipeline "cdc,kafka": kafka is not a pipeline; use cdc, relay or cdc,relay.\n(error code FLAG_INVALID; see docs/errors.md)\n');
    expect(process.exitCode).toBe(1);
  });

  it('--events that is not a whole number above 0 is FLAG_INVALID (it used to fall back to the profile quietly)', async () => {
    for (const value of ['many', '0', '1.5']) {
      const { error } = await refusal(['--events', value]);
      expect(error?.code).toBe('FLAG_INVALID');
      expect(error?.message).toContain(`--events must be a whole number above 0, got ${JSON.stringify(value)}`);
    }
  });

  it('--exactly-once without the cdc pipeline is FLAG_INVALID (the relay has no Connect transactions)', async () => {
    const { printed } = await refusal(['--pipeline', 'relay', '--exactly-once']);
    expect(printed).toContain('--exactly-once is a setting of the CDC connector; --pipeline "relay" has no cdc (use --pipeline cdc).');
    expect(process.exitCode).toBe(1);
  });

  it('an unknown --faults kind is FLAG_INVALID naming the known ones (it used to inject nothing)', async () => {
    const { error } = await refusal(['--faults', 'kill-router,kill-zookeeper']);
    expect(error?.code).toBe('FLAG_INVALID');
    expect(error?.message).toBe(
      '--faults "kill-router,kill-zookeeper": kill-zookeeper is not a fault kind; use kill-router, kill-connect, kill-relay, restart-kafka, kill-kafka, restart-postgres, kill-postgres, kill-kafka-leader, kill-kafka-controller, kill-connect-worker, failover-postgres.',
    );
  });

  it('--minutes outside the soak profile, or not a whole number above 0, is FLAG_INVALID', async () => {
    const { printed } = await refusal(['--profile', 'ci', '--minutes', '3']);
    expect(printed).toContain('--minutes is for --profile soak');
    for (const value of ['0', 'half']) {
      const { error } = await refusal(['--profile', 'soak', '--minutes', value]);
      expect(error?.message).toContain(`--minutes must be a whole number above 0, got ${JSON.stringify(value)}`);
    }
  });
});
