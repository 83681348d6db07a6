/** Two projects: `unit` touches no network; `integration` runs against the real local stack. */
const tsJest = ['ts-jest', { tsconfig: 'tsconfig.json' }];
/** The harness and the examples import the library as a user does (`outbox-router/<part>`): run it from src. */
const moduleNameMapper = {
  '^outbox-router$': '<rootDir>/src',
  '^outbox-router/local-stack$': '<rootDir>/src/config/local-stack',
  // The ORM and driver adapters (src/adapters), one subpath each.
  '^outbox-router/(kysely|drizzle|knex|postgres-js|typeorm|sequelize|prisma|pg-promise)$': '<rootDir>/src/adapters/$1',
  '^outbox-router/(.*)$': '<rootDir>/src/$1',
};

/** The integration files that also run on each server of the PostgreSQL version matrix. */
const MATRIX_TESTS = ['provision', 'provision-managed', 'security-privileges', 'watchdog', 'cdc-e2e', 'slot-invalidation', 'failover-slots'];

/** @type {import('jest').Config} */
module.exports = {
  // A global option (ignored inside `projects`): integration tests talk to a real stack.
  testTimeout: 60_000,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      roots: ['<rootDir>/test/unit'],
      testMatch: ['**/*.test.ts'],
      transform: { '^.+\\.ts$': tsJest },
      moduleNameMapper,
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      // examples/ holds a user's handler tests (outbox-router/testing) against the stack's database.
      roots: ['<rootDir>/test/integration', '<rootDir>/examples'],
      testMatch: ['**/*.test.ts'],
      // It lowers max_slot_wal_keep_size for the whole cluster: only on the matrix's private clusters.
      testPathIgnorePatterns: ['/slot-invalidation\\.test\\.ts$'],
      transform: { '^.+\\.ts$': tsJest },
      moduleNameMapper,
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
    // The PostgreSQL version matrix: the tests whose SQL depends on the server version (provisioning and
    // its privileges, the watchdog's slot queries, CDC through Debezium, slot invalidation), run again on
    // the oldest and newest supported servers (scripts/stack/postgres-versions.ts), with the stack's
    // Kafka, Connect and registry.
    ...[
      { major: 13, version: '13.23.0', port: 55433 },
      { major: 18, version: '18.6.0', port: 55434 },
    ].map(({ major, version, port }) => ({
      displayName: `postgres-${major}`,
      testEnvironment: 'node',
      roots: ['<rootDir>/test/integration'],
      testMatch: MATRIX_TESTS.map((name) => `**/${name}.test.ts`),
      transform: { '^.+\\.ts$': tsJest },
      moduleNameMapper,
      globals: { OUTBOX_TEST_POSTGRES: { version, port } },
      globalSetup: '<rootDir>/test/support/postgres-matrix-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    })),
  ],
};
