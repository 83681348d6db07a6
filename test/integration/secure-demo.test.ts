/**
 * `demo --profile secure`: the demo end to end on the secure stack (TLS and a credential on every hop),
 * run as a user runs it. Its summary must prove every committed event handled exactly once.
 */
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { describeSecure, runCli, SECURE_SECRETS } from '../support/secure-env';

jest.setTimeout(300_000);

describeSecure('secure-demo')('demo --profile secure', () => {
  it('handles every committed order exactly once over TLS and credentials, printing no secret', async () => {
    const run = await runCli(['demo', '--profile', 'secure', '--events', '200', '--warmup-seconds', '0', '--keep', '--json'], {}, 240_000, join(PROJECT_ROOT, 'build', 'scripts', 'cli.js'));
    if (run.code !== 0) throw new Error(`demo exited ${run.code}: ${run.stderr.slice(-2000)}`);
    const summary = JSON.parse(run.stdout) as { ok: boolean; notHandled: number; handledTwice: number; rolledBackSeen: number };
    expect(summary).toMatchObject({ ok: true, notHandled: 0, handledTwice: 0, rolledBackSeen: 0 });
    expect(SECURE_SECRETS.filter((s) => `${run.stdout}${run.stderr}`.includes(s))).toEqual([]);
  });
});
