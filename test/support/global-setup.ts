import { createStack, probeConnect, probeKafka, probePostgres, probeRegistry } from '../../scripts/stack';
import { ensureAlertmanager } from './alertmanager';
import { ensurePrometheus } from './prometheus';
import { startComposeStack } from './containers';

/**
 * Integration tests run against the real stack. By default: the native stack (started here if it is
 * not already answering on its ports). With STACK=containers and a Docker engine: docker-compose.yml
 * through testcontainers, on the same host ports, so the suites do not change.
 */
export default async function globalSetup(): Promise<void> {
  // The watchdog's Alertmanager test needs the binary: installed here, outside any test's time limit
  // (apt-get can take minutes). When that is impossible, only that test fails, with the same message.
  try {
    ensureAlertmanager();
  } catch (error) {
    process.stderr.write(`\n[integration] ${(error as Error).message} Only the Alertmanager tests need it.\n`);
  }
  // The same for Prometheus and promtool (test/integration/monitoring.test.ts).
  try {
    ensurePrometheus();
  } catch (error) {
    process.stderr.write(`\n[integration] ${(error as Error).message} Only the monitoring tests need it.\n`);
  }
  // The secure pass (.ci/run) runs only the secure stack's tests, on that stack: the plain one stays down.
  if (process.env.STACK === 'secure') return;
  if (process.env.STACK === 'containers') {
    await startComposeStack();
    return;
  }
  const probes = { postgres: () => probePostgres(), kafka: probeKafka, connect: probeConnect, registry: probeRegistry };
  const notReady: string[] = [];
  for (const [name, probe] of Object.entries(probes)) {
    await probe().catch(() => notReady.push(name));
  }
  if (notReady.length === 0) return;

  process.stderr.write(`\n[integration] stack not ready (${notReady.join(', ')}): starting it with \`outbox stack up\`…\n`);
  try {
    const { totalMs } = await createStack().up((e) => process.stderr.write(`[integration]   ${e.step}: ${e.detail}\n`));
    process.stderr.write(`[integration] stack ready in ${(totalMs / 1000).toFixed(1)} s\n`);
  } catch (error) {
    throw new Error(
      `Integration tests need the local stack, and it could not be started:\n${(error as Error).message}\n\n` +
        'Fix that, then run `npm run stack:up` until it reports "stack ready", and rerun the tests.',
      { cause: error },
    );
  }
}
