/** scripts/stack/config.ts: defaults, environment, precedence and validation of the stack settings. */
import { OutboxError, isOutboxError } from '../../../src/errors';
import { resolveStackConfig, stackOptionsFromEnv, type StackOptions } from '../../../scripts/stack/config';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';

const ENV_KEYS = ['OUTBOX_STACK_DIR', 'OUTBOX_CACHE_DIR', 'JAVA_HOME', 'OUTBOX_REGISTRY_JAVA_HOME', 'OUTBOX_STACK_READY_TIMEOUT_MS', 'OUTBOX_STACK_EXACTLY_ONCE', 'OUTBOX_STACK_PROFILE', 'XDG_CACHE_HOME'];
const saved: Record<string, string | undefined> = {};

beforeEach(() => {
  for (const key of ENV_KEYS) {
    saved[key] = process.env[key];
    delete process.env[key];
  }
});

afterEach(() => {
  for (const key of ENV_KEYS) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
});

function configError(options: unknown): OutboxError {
  try {
    resolveStackConfig(options as StackOptions);
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected resolveStackConfig to throw');
}

describe('resolveStackConfig defaults', () => {
  it('uses the documented heaps and a 120 s ready timeout', () => {
    const config = resolveStackConfig();
    expect(config.heap).toEqual({ kafka: '768m', connect: '768m', registry: '384m', clusterKafka: '512m', clusterConnect: '512m' });
    expect(config.readyTimeoutMs).toBe(120_000);
    expect(config.javaHome).toBeUndefined();
    expect(config.registryJavaHome).toBeUndefined();
  });

  it('keeps state in <repo>/.stack and the jar cache under XDG_CACHE_HOME', () => {
    process.env.XDG_CACHE_HOME = '/tmp/xdg-cache';
    const config = resolveStackConfig();
    expect(config.stateDir).toBe(`${PROJECT_ROOT}/.stack`);
    expect(config.cacheDir).toBe('/tmp/xdg-cache/outbox-router');
  });

  it('fills the heaps not given and keeps the one given', () => {
    expect(resolveStackConfig({ heap: { connect: '1g' } }).heap).toEqual({ kafka: '768m', connect: '1g', registry: '384m', clusterKafka: '512m', clusterConnect: '512m' });
  });

  it('accepts JVM sizes in m, M, g and G', () => {
    expect(resolveStackConfig({ heap: { kafka: '512M', connect: '2G', registry: '256m' } }).heap).toMatchObject({ kafka: '512M', connect: '2G', registry: '256m' });
  });

  it('returns a frozen object', () => {
    const config = resolveStackConfig();
    expect(Object.isFrozen(config)).toBe(true);
    expect(() => {
      (config as { readyTimeoutMs: number }).readyTimeoutMs = 1;
    }).toThrow(TypeError);
    expect(config.readyTimeoutMs).toBe(120_000);
  });
});

describe('stackOptionsFromEnv', () => {
  it('maps each variable to its option', () => {
    expect(
      stackOptionsFromEnv({
        OUTBOX_STACK_DIR: '/s',
        OUTBOX_CACHE_DIR: '/c',
        JAVA_HOME: '/jdk17',
        OUTBOX_REGISTRY_JAVA_HOME: '/jdk21',
        OUTBOX_STACK_READY_TIMEOUT_MS: '5000',
        OUTBOX_STACK_EXACTLY_ONCE: 'enabled',
        UNRELATED: 'x',
      }),
    ).toEqual({ stateDir: '/s', cacheDir: '/c', javaHome: '/jdk17', registryJavaHome: '/jdk21', readyTimeoutMs: 5000, exactlyOnceSource: 'enabled' });
  });

  it('gives nothing for an empty environment or empty variables', () => {
    expect(stackOptionsFromEnv({})).toEqual({});
    expect(stackOptionsFromEnv({ OUTBOX_STACK_DIR: '', JAVA_HOME: '', OUTBOX_STACK_READY_TIMEOUT_MS: '' })).toEqual({});
  });

  it('reads process.env by default', () => {
    process.env.OUTBOX_REGISTRY_JAVA_HOME = '/opt/jdk-21';
    expect(stackOptionsFromEnv().registryJavaHome).toBe('/opt/jdk-21');
  });
});

describe('resolveStackConfig precedence', () => {
  it('takes the environment over the defaults', () => {
    process.env.OUTBOX_STACK_DIR = '/tmp/env-state';
    process.env.OUTBOX_CACHE_DIR = '/tmp/env-cache';
    process.env.JAVA_HOME = '/tmp/env-jdk';
    process.env.OUTBOX_STACK_READY_TIMEOUT_MS = '4500';
    const config = resolveStackConfig();
    expect(config.stateDir).toBe('/tmp/env-state');
    expect(config.cacheDir).toBe('/tmp/env-cache');
    expect(config.javaHome).toBe('/tmp/env-jdk');
    expect(config.readyTimeoutMs).toBe(4500);
  });

  it('takes explicit options over the environment', () => {
    process.env.OUTBOX_STACK_DIR = '/tmp/env-state';
    process.env.JAVA_HOME = '/tmp/env-jdk';
    process.env.OUTBOX_STACK_READY_TIMEOUT_MS = '4500';
    const config = resolveStackConfig({ stateDir: '/tmp/opt-state', javaHome: '/tmp/opt-jdk', readyTimeoutMs: 9000 });
    expect(config.stateDir).toBe('/tmp/opt-state');
    expect(config.javaHome).toBe('/tmp/opt-jdk');
    expect(config.readyTimeoutMs).toBe(9000);
  });

  it('leaves exactly-once source support unset (the rendered worker config decides) unless OUTBOX_STACK_EXACTLY_ONCE says', () => {
    expect(resolveStackConfig().exactlyOnceSource).toBeUndefined();
    process.env.OUTBOX_STACK_EXACTLY_ONCE = 'enabled';
    expect(resolveStackConfig().exactlyOnceSource).toBe('enabled');
    process.env.OUTBOX_STACK_EXACTLY_ONCE = 'disabled';
    expect(resolveStackConfig().exactlyOnceSource).toBe('disabled');
  });

  it('leaves the profile unset (the recorded one decides) unless OUTBOX_STACK_PROFILE or the option says', () => {
    expect(resolveStackConfig().profile).toBeUndefined();
    process.env.OUTBOX_STACK_PROFILE = 'cluster';
    expect(resolveStackConfig().profile).toBe('cluster');
    expect(resolveStackConfig({ profile: 'single' }).profile).toBe('single');
  });

  it('rejects an OUTBOX_STACK_PROFILE other than single or cluster, naming the variable', () => {
    process.env.OUTBOX_STACK_PROFILE = 'ha';
    const error = configError({});
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('profile (from OUTBOX_STACK_PROFILE=ha)');
  });

  it('rejects an OUTBOX_STACK_EXACTLY_ONCE other than enabled or disabled, naming the variable', () => {
    process.env.OUTBOX_STACK_EXACTLY_ONCE = 'preparing';
    const error = configError({});
    expect(error.message).toContain('exactlyOnceSource (from OUTBOX_STACK_EXACTLY_ONCE=preparing)');
  });

  it('rejects a non-numeric timeout from the environment, naming the field', () => {
    process.env.OUTBOX_STACK_READY_TIMEOUT_MS = 'soon';
    const error = configError({});
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('readyTimeoutMs');
  });
});

describe('resolveStackConfig validation', () => {
  it.each([['2 gigs'], ['512'], ['1.5g'], ['512k'], ['']])('rejects heap %j naming heap.kafka', (bad) => {
    const error = configError({ heap: { kafka: bad } });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('heap.kafka');
    expect(error.message).not.toContain('heap.connect');
    expect(error.details).toHaveProperty('issues');
  });

  it('names the right heap when another one is bad', () => {
    expect(configError({ heap: { registry: '2 gigs' } }).message).toContain('heap.registry');
  });

  it('rejects an unknown key, naming it', () => {
    const error = configError({ stateDirr: '/tmp/typo' });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('stateDirr');
  });

  it.each([[0], [-1], [1.5]])('rejects readyTimeoutMs %p', (bad) => {
    const error = configError({ readyTimeoutMs: bad });
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('readyTimeoutMs');
  });

  it('rejects an empty stateDir', () => {
    expect(configError({ stateDir: '' }).message).toContain('stateDir');
  });
});
