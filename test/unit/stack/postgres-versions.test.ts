/**
 * The PostgreSQL version matrix has two homes that must agree: scripts/stack/postgres-versions.ts (what
 * `stack postgres` downloads and starts) and jest.config.js (which projects run on which port).
 */
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';
import { matrixEntry, POSTGRES_MATRIX } from '../../../scripts/stack/postgres-versions';
import { STACK_PORTS, STACK_VERSIONS } from '../../../scripts/stack/settings';

interface JestProject {
  displayName?: string;
  globals?: { OUTBOX_TEST_POSTGRES?: { version: string; port: number } };
  testMatch?: string[];
  testPathIgnorePatterns?: string[];
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const jestConfig = require(join(PROJECT_ROOT, 'jest.config.js')) as { projects: JestProject[] };

describe('PostgreSQL version matrix', () => {
  const matrixProjects = jestConfig.projects.filter((p) => p.globals?.OUTBOX_TEST_POSTGRES);

  it('jest.config.js has one project per matrix entry, on the same version and port', () => {
    expect(matrixProjects.map((p) => p.globals?.OUTBOX_TEST_POSTGRES)).toEqual(POSTGRES_MATRIX.map(({ version, port }) => ({ version, port })));
    expect(matrixProjects.map((p) => p.displayName)).toEqual(POSTGRES_MATRIX.map((e) => `postgres-${e.version.split('.')[0]}`));
  });

  it('covers the oldest supported major and a newer one, on ports of their own', () => {
    const majors = POSTGRES_MATRIX.map((e) => Number(e.version.split('.')[0]));
    expect(Math.min(...majors)).toBe(STACK_VERSIONS.postgresMin);
    expect(Math.max(...majors)).toBeGreaterThan(15);
    const ports = POSTGRES_MATRIX.map((e) => e.port);
    expect(new Set([...ports, ...Object.values(STACK_PORTS)]).size).toBe(ports.length + new Set(Object.values(STACK_PORTS)).size);
  });

  it('runs slot-invalidation on the matrix only: it lowers max_slot_wal_keep_size for the whole cluster', () => {
    const integration = jestConfig.projects.find((p) => p.displayName === 'integration');
    expect(integration?.testPathIgnorePatterns?.some((p) => new RegExp(p).test('/x/test/integration/slot-invalidation.test.ts'))).toBe(true);
    for (const p of matrixProjects) expect(p.testMatch).toContain('**/slot-invalidation.test.ts');
  });

  it('matrixEntry takes a version or its major, and names the choices for anything else', () => {
    expect(matrixEntry('13').version).toBe('13.23.0');
    expect(matrixEntry('18.6.0').port).toBe(55434);
    expect(() => matrixEntry('12')).toThrow(/not in the version matrix; choose one of 13\.23\.0, 18\.6\.0/);
  });
});
