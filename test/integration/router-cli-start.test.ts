import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/stack/paths';
import { randomName, testKafka } from '../support/stack-env';

jest.setTimeout(120_000);

/**
 * `outbox router` whose start fails must exit with the error, not hang: its /metrics listener opens
 * before the router starts, and was left open (keeping the process alive) when start() threw.
 */
describe('outbox router: a start that fails', () => {
  it('prints the error and exits 1 instead of hanging on its open metrics listener', async () => {
    const name = randomName('clistart').toLowerCase().replace(/[^a-z0-9]/g, '');
    const dlq = `outbox.dlq.${name}`;
    const admin = testKafka().admin();
    await admin.connect();
    try {
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic: dlq, numPartitions: 1 }] });
      // Passes the check made before anything connects, fails the one at start against the topics that exist.
      const pattern = `^outbox\\.(event|dlq)\\.${name}$`;
      const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), 'router', '--handlers', join(PROJECT_ROOT, 'dist/examples/order-handlers.js'), '--topics', pattern, '--metrics-port', '0', '--consumer', name], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      const hung = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 60_000).unref());
      const outcome = await Promise.race([exited, hung]);
      if (outcome === 'hung') child.kill('SIGKILL');
      expect(outcome).toBe(1);
      expect(stderr).toContain('TOPIC_PATTERN_INVALID');
      expect(stderr).toContain(dlq);
    } finally {
      await admin.deleteTopics({ topics: [dlq] }).catch(() => {});
      await admin.disconnect();
    }
  });
});
