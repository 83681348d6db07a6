import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { flagOverrides, loadCommandConfig } from '../../../src/cli/config-option';
import { RELAY_FLAGS } from '../../../src/cli/relay-command';
import { ROUTER_FLAGS, routerCommand } from '../../../src/cli/router-command';
import { WATCHDOG_FLAGS } from '../../../src/cli/watchdog-command';
import { thrown } from '../../support/expect-error';

/** Parses `args` with the router command's options only (its action does not run). */
function routerArgs(args: string[]): Command {
  const command = routerCommand().action(() => {});
  command.parse(args, { from: 'user' });
  return command;
}

function withEnv<T>(env: Record<string, string>, fn: () => T): T {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    return fn();
  } finally {
    for (const key of Object.keys(env)) delete process.env[key];
    Object.assign(process.env, saved);
  }
}

describe('flags → config (one helper for every service command)', () => {
  it('maps each given flag onto its setting path, parsed, and names the flag as the source', () => {
    const { overrides, flagNames } = flagOverrides(ROUTER_FLAGS, { lanes: '4', block: ['order', 'payment'], allowGroupIdMismatch: true, metricsHost: '0.0.0.0' });
    expect(overrides).toEqual({ router: { lanes: 4, policies: { order: 'block', payment: 'block' }, allowGroupIdMismatch: true, metricsHost: '0.0.0.0' } });
    expect(flagNames).toEqual({ 'router.lanes': '--lanes', 'router.policies': '--block', 'router.allowGroupIdMismatch': '--allow-group-id-mismatch', 'router.metricsHost': '--metrics-host' });
  });

  it('every flag of the three services maps to a setting of the config schema', () => {
    for (const setting of [...ROUTER_FLAGS, ...RELAY_FLAGS, ...WATCHDOG_FLAGS]) {
      expect(setting.path).toMatch(/^(router|relay|watchdog)\.[a-zA-Z]+$/);
    }
  });

  it('an absent flag leaves the env var and the schema default in force (no flag defaults shadow them)', () => {
    const loaded = withEnv({ OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS: '20' }, () => loadCommandConfig(routerArgs(['--handlers', 'h.js']), ROUTER_FLAGS));
    expect(loaded.config.router.maxTransactionRecords).toBe(20);
    expect(loaded.sources.get('router.maxTransactionRecords')).toEqual({ kind: 'env', name: 'OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS' });
    expect(loaded.config.router.lanes).toBe(1);
    expect(loaded.sources.get('router.lanes')).toBeUndefined();
  });

  it('a flag wins over its env var', () => {
    const loaded = withEnv({ OUTBOX_ROUTER_LANES: '2', OUTBOX_ROUTER_METRICS_PORT: '9999' }, () => loadCommandConfig(routerArgs(['--lanes', '6', '--metrics-port', '0']), ROUTER_FLAGS));
    expect(loaded.config.router).toMatchObject({ lanes: 6, metricsPort: 0 });
    expect(loaded.sources.get('router.lanes')).toEqual({ kind: 'flag', name: '--lanes' });
  });

  it('a bad flag value is FLAG_INVALID naming the flag; a value out of the schema range names the setting and the flag', () => {
    const low = thrown(() => loadCommandConfig(routerArgs(['--lanes', '0']), ROUTER_FLAGS));
    expect(low.code).toBe('FLAG_INVALID');
    expect(low.message).toContain('--lanes must be at least 1, got 0');
    const word = thrown(() => loadCommandConfig(routerArgs(['--partitions', 'many']), ROUTER_FLAGS));
    expect(word.code).toBe('FLAG_INVALID');
    expect(word.message).toContain('--partitions "many" is not a whole number');
    const error = thrown(() => loadCommandConfig(routerArgs(['--lanes', '65']), ROUTER_FLAGS));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('router.lanes (from --lanes)');
  });
});

describe('outbox router: flags refused before anything connects', () => {
  let stderr: jest.SpyInstance;
  beforeEach(() => {
    stderr = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
  });
  afterEach(() => {
    stderr.mockRestore();
    process.exitCode = undefined;
  });

  it('--topics that is not a regular expression is TOPIC_PATTERN_INVALID', () => {
    const error = thrown(() => loadCommandConfig(routerArgs(['--handlers', 'h.js', '--topics', '^outbox\\.event\\.(order']), ROUTER_FLAGS));
    expect(error.code).toBe('TOPIC_PATTERN_INVALID');
    expect(error.message).toContain('--topics "^outbox\\\\.event\\\\.(order" is not a valid regular expression');
  });

  it('a malformed --unknown-event-type-for is FLAG_INVALID', () => {
    const error = thrown(() => routerArgs(['--unknown-event-type-for', 'order=ignore']));
    expect(error.code).toBe('FLAG_INVALID');
    expect(error.message).toContain('--unknown-event-type-for "order=ignore" must be <aggregateType>=<');
  });

  it('no handlers module is HANDLERS_INVALID, printed as one paragraph with exit code 1', async () => {
    const saved = process.env.OUTBOX_ROUTER_HANDLERS;
    delete process.env.OUTBOX_ROUTER_HANDLERS;
    try {
      await routerCommand().parseAsync([], { from: 'user' });
    } finally {
      if (saved !== undefined) process.env.OUTBOX_ROUTER_HANDLERS = saved;
    }
    expect(process.exitCode).toBe(1);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toBe(
      'outbox: The router needs its handlers module: pass --handlers <module> (or set router.handlers / OUTBOX_ROUTER_HANDLERS).\n(error code HANDLERS_INVALID; see docs/errors.md)\n',
    );
  });

  it('--schemas is router.schemasDir, resolved; a folder without .avsc files stops the router before it connects (SCHEMAS_NOT_FOUND)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'router-cli-'));
    expect(loadCommandConfig(routerArgs(['--schemas', 'rel/schemas']), ROUTER_FLAGS).config.router.schemasDir).toBe(resolve('rel/schemas'));
    const handlers = join(dir, 'handlers.js');
    writeFileSync(handlers, 'exports.default = { order: { OrderCreated: async () => {} } };\n');
    await routerCommand().parseAsync(['--handlers', handlers, '--schemas', dir], { from: 'user' });
    expect(process.exitCode).toBe(1);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain(`No Avro schemas in ${dir}`);
  });
});
