import { z } from 'zod';
import { OutboxError } from 'outbox-router/errors';
import { defaultCacheDir, defaultStateDir } from './paths';
import { STACK_PROFILES } from './settings';

/** Kafka's own default for exactly.once.source.support; docker-compose.yml uses the same. */
export const DEFAULT_EXACTLY_ONCE_SOURCE = 'disabled';
export type ExactlyOnceSource = 'disabled' | 'enabled';

const heap = z.string().regex(/^\d+[mMgG]$/, 'a JVM size such as 512m or 1g');

export const stackConfigSchema = z
  .object({
    stateDir: z.string().min(1).default(defaultStateDir),
    cacheDir: z.string().min(1).default(defaultCacheDir),
    /** JDK for Kafka and Connect (17+); default: $JAVA_HOME, the `java` on PATH, then /usr/lib/jvm/*. */
    javaHome: z.string().min(1).optional(),
    /** JDK for Apicurio Registry 3.3, whose classes need Java 21+; default: the first 21+ JDK found. */
    registryJavaHome: z.string().min(1).optional(),
    heap: z
      .object({
        kafka: heap.default('768m'),
        connect: heap.default('768m'),
        registry: heap.default('384m'),
        /** The cluster profile's per-node heaps: five JVMs where the single stack has two (docs/local-stack.md). */
        clusterKafka: heap.default('512m'),
        clusterConnect: heap.default('512m'),
      })
      .strict()
      .prefault({}),
    readyTimeoutMs: z.number().int().positive().default(120_000),
    /**
     * The Connect worker's exactly.once.source.support (KIP-618), read at its start. `disabled` is Kafka's
     * default and what a Connect cluster has unless its operator turned it on; `enabled` runs every source
     * task on the worker with a transactional producer, whether its connector asks for it or not
     * (docs/local-stack.md). A connector with connector.exactlyOnce needs `enabled`. Unset: what the
     * stack's rendered worker config already says (the last `stack up` that set it), else `disabled`, so
     * a later `stack up` (the tests', the chaos run's restarts) keeps the worker as it was started.
     */
    exactlyOnceSource: z.enum(['disabled', 'enabled']).optional(),
    /**
     * `single` (one broker, one worker) or `cluster` (three brokers, two workers). Unset: the profile the
     * stack was last started with (recorded in its state folder), else `single`; see stack-profile.ts.
     */
    profile: z.enum(STACK_PROFILES).optional(),
    /** The cluster profile's scheduled.rebalance.max.delay.ms; unset: CLUSTER.scheduledRebalanceMaxDelayMs. For measuring only. */
    connectRebalanceDelayMs: z.number().int().min(0).optional(),
  })
  .strict();

export type StackOptions = z.input<typeof stackConfigSchema>;
export type StackConfig = Readonly<z.output<typeof stackConfigSchema>>;

/** Environment variables that feed the stack's settings; options passed in code win over them. */
export function stackOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): StackOptions {
  const options: StackOptions = {};
  if (env.OUTBOX_STACK_DIR) options.stateDir = env.OUTBOX_STACK_DIR;
  if (env.OUTBOX_CACHE_DIR) options.cacheDir = env.OUTBOX_CACHE_DIR;
  if (env.JAVA_HOME) options.javaHome = env.JAVA_HOME;
  if (env.OUTBOX_REGISTRY_JAVA_HOME) options.registryJavaHome = env.OUTBOX_REGISTRY_JAVA_HOME;
  if (env.OUTBOX_STACK_READY_TIMEOUT_MS) options.readyTimeoutMs = Number(env.OUTBOX_STACK_READY_TIMEOUT_MS);
  if (env.OUTBOX_STACK_EXACTLY_ONCE) options.exactlyOnceSource = env.OUTBOX_STACK_EXACTLY_ONCE as StackOptions['exactlyOnceSource'];
  if (env.OUTBOX_STACK_PROFILE) options.profile = env.OUTBOX_STACK_PROFILE as StackOptions['profile'];
  return options;
}

const ENV_NAMES: Record<string, string> = {
  stateDir: 'OUTBOX_STACK_DIR',
  cacheDir: 'OUTBOX_CACHE_DIR',
  javaHome: 'JAVA_HOME',
  registryJavaHome: 'OUTBOX_REGISTRY_JAVA_HOME',
  readyTimeoutMs: 'OUTBOX_STACK_READY_TIMEOUT_MS',
  exactlyOnceSource: 'OUTBOX_STACK_EXACTLY_ONCE',
  profile: 'OUTBOX_STACK_PROFILE',
};

export function resolveStackConfig(options: StackOptions = {}): StackConfig {
  const fromEnv = stackOptionsFromEnv();
  const parsed = stackConfigSchema.safeParse({ ...fromEnv, ...options });
  if (!parsed.success) {
    const issues = parsed.error.issues
      .map((i) => {
        const key = String(i.path[0] ?? '');
        const viaEnv = key in fromEnv && !(key in options) && ENV_NAMES[key] ? ` (from ${ENV_NAMES[key]}=${process.env[ENV_NAMES[key]]})` : '';
        return `${i.path.join('.') || '(root)'}${viaEnv}: ${i.message}`;
      })
      .join('; ');
    throw new OutboxError('CONFIG_INVALID', `Invalid stack settings: ${issues}.`, { details: { issues: parsed.error.issues } });
  }
  return Object.freeze({ ...parsed.data, heap: Object.freeze(parsed.data.heap) });
}
