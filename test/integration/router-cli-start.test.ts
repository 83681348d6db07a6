import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
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
      const child = spawn(process.execPath, [join(PROJECT_ROOT, 'dist/cli/main.js'), 'router', '--handlers', join(PROJECT_ROOT, 'build/examples/order-handlers.js'), '--topics', pattern, '--metrics-port', '0', '--consumer', name], {
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

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('outbox router: probes', () => {
  it('/livez answers from the start; /readyz turns 200 only after the group join, and the router stops on SIGTERM with 0', async () => {
    const name = randomName('ready').toLowerCase().replace(/[^a-z0-9]/g, '');
    const topic = `outbox.event.${name}`;
    const admin = testKafka().admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }] });
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [join(PROJECT_ROOT, 'dist/cli/main.js'), '--log-format', 'json', 'router', '--handlers', join(PROJECT_ROOT, 'build/examples/order-handlers.js'), '--topics', `^${topic.replace(/\./g, '\\.')}$`, '--metrics-port', String(port), '--consumer', name],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const status = async (path: string) => fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.status, () => 0);
    try {
      const seen: Array<{ ready: number; live: number; at: number }> = [];
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const [ready, live] = [await status('/readyz'), await status('/livez')];
        seen.push({ ready, live, at: Date.now() });
        if (ready === 200) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      // A poll that raced the listener's opening (one probe refused, the next answered) says nothing either way.
      const answered = seen.filter((s) => s.live !== 0 && s.ready !== 0);
      expect(answered.length).toBeGreaterThan(0);
      expect(answered.every((s) => s.live === 200)).toBe(true);
      // Not ready while it starts; the first 200 came back after the group join was logged (its time).
      expect(answered[0]?.ready).toBe(503);
      const readyAt = seen[seen.length - 1] as { ready: number; at: number };
      expect(readyAt.ready).toBe(200);
      for (let i = 0; i < 100 && !stderr.includes('"router.group-join"'); i++) await new Promise((r) => setTimeout(r, 50));
      const joinLine = stderr.split('\n').find((l) => l.includes('"router.group-join"'));
      expect(joinLine).toBeDefined();
      expect(readyAt.at).toBeGreaterThanOrEqual((JSON.parse(joinLine as string) as { time: number }).time);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect();
    }
  });
});
