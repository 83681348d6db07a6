import { resolve } from 'node:path';

/**
 * STACK=containers: docker-compose.yml through testcontainers. Not exercised in this project's CI,
 * which has no Docker engine; it exists for contributors who have one. The compose file publishes the
 * native stack's host ports, so tests connect the same way either way.
 */
export async function startComposeStack(): Promise<void> {
  const { DockerComposeEnvironment, Wait } = await import('testcontainers');
  try {
    const environment = await new DockerComposeEnvironment(resolve(__dirname, '..', '..'), 'docker-compose.yml')
      .withWaitStrategy('postgres-1', Wait.forHealthCheck())
      .withWaitStrategy('kafka-1', Wait.forHealthCheck())
      .withWaitStrategy('connect-1', Wait.forHealthCheck())
      .withWaitStrategy('registry-1', Wait.forHttp('/apis/ccompat/v7/subjects', 8080))
      .withStartupTimeout(180_000)
      .up();
    (globalThis as { __outboxCompose?: unknown }).__outboxCompose = environment;
  } catch (error) {
    throw new Error(
      `STACK=containers needs a reachable Docker engine with Compose, and starting docker-compose.yml failed: ${(error as Error).message}\n` +
        'Unset STACK to use the native stack (`npm run stack:up`).',
      { cause: error },
    );
  }
}

export async function stopComposeStack(): Promise<void> {
  const environment = (globalThis as { __outboxCompose?: { down(): Promise<unknown> } }).__outboxCompose;
  if (environment) await environment.down();
}
