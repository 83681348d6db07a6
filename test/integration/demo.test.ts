import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import type { DemoSummary } from '../../scripts/demo/types';

jest.setTimeout(300_000);

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `npm run demo` as a user runs it (smaller), on the local stack's `app` database and default connector. */
describe('outbox demo', () => {
  it('handles every committed event exactly once and delivers no rolled-back one', async () => {
    const { code, stdout, stderr } = await runCli(['--log-format', 'json', 'demo', '--events', '400', '--rate', '150', '--warmup-seconds', '2', '--keep', '--json']);
    if (code !== 0) process.stderr.write(stderr.slice(-4000));
    const summary = JSON.parse(stdout) as DemoSummary;
    expect(code).toBe(0);
    expect(summary.ok).toBe(true);
    expect(summary.committed + summary.rolledBack).toBe(400);
    expect(summary.rolledBack).toBe(40);
    expect(summary.handled).toBe(summary.committed);
    expect(summary.handledTwice).toBe(0);
    expect(summary.rolledBackSeen).toBe(0);
    expect(summary.slot.active).toBe(true);
    expect(summary.commitToHandledMs.p50).toBeGreaterThanOrEqual(0);
    // The warm-up (2 s at 150/s) ran before the measured window, was all handled, and is in no count above.
    expect(summary.coldStart.warmupEvents).toBe(300);
    expect(summary.coldStart.warmupHandled).toBe(300);
    expect(summary.coldStart.readySeconds).toBeGreaterThanOrEqual(0);
    expect(summary.coldStart.stackSeconds).toBeGreaterThanOrEqual(0);
    expect(stderr).toMatch(/warming up: 300 unmeasured orders at 150\/s/);
    // progress was shown while it ran (log lines when not on a terminal)
    expect(stderr).toMatch(/"phase":"write"/);
  });

  it('names a bad flag and its fix', async () => {
    const { code, stderr } = await runCli(['demo', '--events', '-5']);
    expect(code).toBe(1);
    expect(stderr).toMatch(/--events must be a number above 0 and at most 1000000, got "-5"\.\n\(error code FLAG_INVALID; see docs\/errors\.md\)\n/);
  });
});
