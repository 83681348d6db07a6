import { createStack } from '../../scripts/stack';
import { POSTGRES_MATRIX, startMatrixCluster } from '../../scripts/stack/postgres-versions';
import globalSetup from './global-setup';

/**
 * The version-matrix projects (jest.config.js: `postgres-13`, `postgres-18`): the stack as for the
 * integration project (Kafka, Connect and the registry are shared), plus the matrix's PostgreSQL
 * clusters, downloaded and started here. Jest runs a globalSetup module once however many projects name
 * it (with the first project's config), so this starts every cluster of the matrix, not only its
 * project's. They stay running, like the stack; `stack down` stops them.
 */
export default async function matrixSetup(): Promise<void> {
  await globalSetup();
  const { paths } = createStack();
  for (const { version } of POSTGRES_MATRIX) {
    await startMatrixCluster(paths, version, (detail) => process.stderr.write(`\n[postgres ${version}] ${detail}`));
  }
  process.stderr.write('\n');
}
