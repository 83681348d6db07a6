import { createStack } from '../../scripts/stack';
import { startMatrixCluster } from '../../scripts/stack/postgres-versions';
import globalSetup from './global-setup';
import type { MatrixTarget } from './stack-env';

/**
 * The version-matrix projects (jest.config.js: `postgres-13`, `postgres-18`): the stack as for the
 * integration project (Kafka, Connect and the registry are shared), plus this project's PostgreSQL
 * cluster, downloaded and started here. It stays running, like the stack; `.ci/run` stops it.
 */
export default async function matrixSetup(_global: unknown, project: { globals: Record<string, unknown> }): Promise<void> {
  await globalSetup();
  const target = project.globals.OUTBOX_TEST_POSTGRES as MatrixTarget;
  const cluster = await startMatrixCluster(createStack().paths, target.version, (detail) => process.stderr.write(`\n[postgres ${target.version}] ${detail}`));
  if (cluster.port !== target.port) throw new Error(`jest.config.js gives PostgreSQL ${target.version} port ${target.port}, the matrix ${cluster.port}`);
  process.stderr.write('\n');
}
