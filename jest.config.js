/** Two projects: `unit` touches no network; `integration` runs against the real local stack. */
const tsJest = ['ts-jest', { tsconfig: 'tsconfig.json' }];
/** The harness and the examples import the library as a user does (`outbox-router/<part>`): run it from src. */
const moduleNameMapper = {
  '^outbox-router$': '<rootDir>/src',
  '^outbox-router/local-stack$': '<rootDir>/src/config/local-stack',
  '^outbox-router/(.*)$': '<rootDir>/src/$1',
};

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
      roots: ['<rootDir>/test/integration'],
      testMatch: ['**/*.test.ts'],
      transform: { '^.+\\.ts$': tsJest },
      moduleNameMapper,
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
