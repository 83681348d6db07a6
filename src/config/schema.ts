import { z } from 'zod';
import { aclsSchema } from './acls-schema';
import { consoleSchema } from './console-schema';
import { relaySchema } from './relay-schema';
import { routerSchema } from './router-schema';
import { watchdogSchema } from './watchdog-schema';
import { LOCAL_POSTGRES, LOCAL_ROLE_PASSWORDS, STACK_HOST, STACK_PORTS, stackUrls, isLocalStackDatabase } from './local-stack';

/**
 * Every setting of outbox-router. Defaults target the local stack, so a new user needs no
 * configuration to try it. `OutboxOptions` is input (env, file, flags, code); `OutboxConfig` is the
 * resolved, frozen result passed down to every part.
 */

/** SQL identifiers from configuration: plain names only, and escaped wherever they are used anyway. */
const identifier = z
  .string()
  .min(1)
  .refine((s) => Buffer.byteLength(s) <= 63, 'at most 63 bytes in UTF-8 (PostgreSQL truncates longer identifiers)');

/** Replication slot names allow lower-case letters, digits and underscores only (PostgreSQL's rule). */
const slotName = z
  .string()
  .regex(/^[a-z0-9_]{1,63}$/, 'lower-case letters, digits and _ only, at most 63 characters (PostgreSQL slot naming rule)');

const secret = z.string().min(1).optional();

export const DATABASE_SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;
export type DatabaseSslMode = (typeof DATABASE_SSL_MODES)[number];

/** The sslmode in force: the one set, else verify-full when TLS was asked for in any way, else disable. */
export function databaseSslMode(database: { ssl: boolean; sslMode?: DatabaseSslMode | undefined; sslRootCert?: string | undefined }): DatabaseSslMode {
  return database.sslMode ?? (database.ssl || database.sslRootCert ? 'verify-full' : 'disable');
}

export const databaseSchema = z
  .object({
    host: z.string().min(1).default(STACK_HOST),
    port: z.number().int().min(1).max(65535).default(STACK_PORTS.postgres),
    database: z.string().min(1).default(LOCAL_POSTGRES.database),
    /** The admin role: runs provisioning, owns the publication. */
    user: z.string().min(1).default(LOCAL_POSTGRES.user),
    password: secret.default(LOCAL_POSTGRES.password),
    /** TLS to PostgreSQL: true is sslMode verify-full (docs/security.md, "PostgreSQL over TLS"). */
    ssl: z.boolean().default(false),
    /**
     * libpq's sslmode, for every connection this toolkit makes and for Debezium's (`database.sslmode`).
     * Unset: verify-full when `ssl` or `sslRootCert` is set, else disable. `require` encrypts without
     * checking who answers: it is accepted, and never the default.
     */
    sslMode: z.enum(DATABASE_SSL_MODES).optional(),
    /** PEM CA bundle that signed the server's certificate (libpq's sslrootcert); unset: the system's CAs (Node) and Java's truststore (Debezium). */
    sslRootCert: z.string().min(1).optional(),
    statementTimeoutMs: z.number().int().positive().default(30_000),
  })
  .strict();

export const outboxTablesSchema = z
  .object({
    schema: identifier.default('public'),
    table: identifier.default('outbox'),
    inboxTable: identifier.default('inbox'),
    heartbeatTable: identifier.default('outbox_heartbeat'),
    migrationsTable: identifier.default('outbox_migrations'),
    publication: identifier.default('outbox_publication'),
    /** Largest payload accepted at write time; Kafka's default record limit is 1 MiB. */
    maxPayloadBytes: z.number().int().positive().max(100 * 1024 * 1024).default(900 * 1024),
    /**
     * How the outbox is cleaned under CDC (docs/operations.md, "Outbox cleanup under CDC"): 'delete' deletes
     * confirmed rows in batches (migrations 011, 012); 'partition' makes the outbox a table partitioned by
     * its UUIDv7 id (db:provision converts an empty outbox) and drops whole partitions the slot has
     * confirmed (migration 015). Every id must then be a UUIDv7 of about now.
     */
    cleanupMode: z.enum(['delete', 'partition']).default('delete'),
    /** With cleanupMode 'partition': the time window of one partition, in seconds (default one hour). */
    partitionSeconds: z.number().int().min(1, 'outbox.partitionSeconds: at least 1').max(31 * 24 * 3600).default(3600),
    /** With cleanupMode 'partition': windows made ahead of the current one by each cleanup run. */
    partitionsAhead: z.number().int().min(1, 'outbox.partitionsAhead: at least 1').max(1000).default(24),
  })
  .strict();

/**
 * Role passwords have no schema default: `withLocalRolePasswords` fills in the published development
 * passwords for the local stack only, so another database never gets them silently (db:provision then
 * needs OUTBOX_*_PASSWORD to create a role, and leaves an existing role's password alone without it).
 */
export const rolesSchema = z
  .object({
    /** Debezium's role: LOGIN REPLICATION, SELECT on the published tables, nothing else. */
    cdc: identifier.default('outbox_cdc'),
    cdcPassword: secret,
    /** The application's role: may INSERT (and DELETE, for insert-then-delete) into the outbox. */
    app: identifier.default('outbox_app'),
    appPassword: secret,
    /** The watchdog's role: pg_monitor only. */
    monitor: identifier.default('outbox_monitor'),
    monitorPassword: secret,
    /** The router's role: writes the inbox and the parked keys; handlers' tables are granted by the user. */
    router: identifier.default('outbox_router'),
    routerPassword: secret,
    /** The polling relay's role: reads, marks and deletes outbox rows, never inserts them. */
    relay: identifier.default('outbox_relay'),
    relayPassword: secret,
  })
  .strict();

export const ROLE_KINDS = ['cdc', 'app', 'monitor', 'router', 'relay'] as const;
export type RoleKind = (typeof ROLE_KINDS)[number];

type RolesAndDatabase = { roles: z.output<typeof rolesSchema>; database: z.output<typeof databaseSchema> };

/**
 * Every role needs its own name: provisioning resets each role's attributes and grants, so two settings
 * naming one role would give it both sets of rights, or strip one. (A role may be database.user: the
 * router runs as PGUSER=outbox_router. Only db:provision refuses to reset the role it connects as.)
 */
function distinctRoleNames(config: RolesAndDatabase, ctx: z.RefinementCtx): void {
  const seen = new Map<string, string>();
  for (const kind of ROLE_KINDS) {
    const name = config.roles[kind];
    const other = seen.get(name);
    if (other) {
      ctx.addIssue({ code: 'custom', path: ['roles', kind], message: `"${name}" is also roles.${other}; each role needs a name of its own, or one would get the other's rights` });
    }
    seen.set(name, kind);
  }
}

/** The published development passwords, for the local stack's database only (see rolesSchema). */
function withLocalRolePasswords<T extends RolesAndDatabase>(config: T): T {
  if (!isLocalStackDatabase(config.database)) return config;
  const roles = { ...config.roles };
  for (const kind of ROLE_KINDS) roles[`${kind}Password`] ??= LOCAL_ROLE_PASSWORDS[kind];
  return { ...config, roles };
}

/** A file path read when a client is built (not at load time), so a missing file names itself there. */
const filePath = z.string().min(1);

/**
 * TLS to the brokers. On when `enabled` or any file is set. `rejectUnauthorized: false` accepts any
 * certificate: for a throw-away test cluster only.
 */
export const kafkaSslSchema = z
  .object({
    enabled: z.boolean().default(false),
    /** PEM CA bundle that signed the brokers' certificates (else Node's default CAs). */
    caFile: filePath.optional(),
    /** PEM client certificate and key, for mutual TLS. */
    certFile: filePath.optional(),
    keyFile: filePath.optional(),
    /** Passphrase of an encrypted keyFile. */
    keyPassword: secret,
    rejectUnauthorized: z.boolean().default(true),
  })
  .strict()
  .refine((s) => Boolean(s.certFile) === Boolean(s.keyFile), { message: 'certFile and keyFile go together (mutual TLS needs both)', path: ['keyFile'] });

export const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer', 'aws-msk-iam'] as const;
export type SaslMechanism = (typeof SASL_MECHANISMS)[number];

/** What kafkajs's OAUTHBEARER mechanism asks for each time it authenticates: a token (a JWT, usually). */
export type OAuthBearerProvider = () => Promise<{ value: string }>;

/**
 * Where an OAUTHBEARER token comes from, one of three: `token`, a fixed token (tests, Kafka's unsecured
 * JWS validator); `tokenUrl` with `clientId` and `clientSecret`, an OIDC client-credentials grant whose
 * token is cached until shortly before it expires; `provider`, a function given in code (library use only).
 */
export const kafkaOAuthBearerSchema = z
  .object({
    token: secret,
    /** The identity provider's token endpoint (not a secret: it is shown by `outbox config`). */
    tokenUrl: z.string().url().optional(),
    clientId: z.string().min(1).optional(),
    clientSecret: secret,
    /** Space-separated scopes sent with the grant, if the provider wants them. */
    scope: z.string().min(1).optional(),
    /** Code only: a function returning `{ value: token }`, called by kafkajs whenever it authenticates. */
    provider: z.custom<OAuthBearerProvider>((v) => typeof v === 'function', 'a function returning Promise<{ value: string }>').optional(),
  })
  .strict();

export const kafkaAwsSchema = z
  .object({
    /** The MSK cluster's AWS region, for aws-msk-iam (credentials come from the AWS SDK's default chain). */
    region: z.string().min(1).optional(),
  })
  .strict();

type SaslInput = { mechanism?: SaslMechanism | undefined; username?: string | undefined; password?: string | undefined; oauthbearer: z.output<typeof kafkaOAuthBearerSchema>; aws: z.output<typeof kafkaAwsSchema> };

/**
 * The chosen mechanism has the settings it needs (another mechanism's settings may stay set, unused:
 * switching mechanisms is then one variable). OAUTHBEARER takes exactly one token source.
 */
function saslSettingsMatch(s: SaslInput, ctx: z.RefinementCtx): void {
  const issue = (path: string[], message: string) => ctx.addIssue({ code: 'custom', path, message });
  const o = s.oauthbearer;
  if (s.mechanism === 'plain' || s.mechanism === 'scram-sha-256' || s.mechanism === 'scram-sha-512') {
    if (s.username === undefined || s.password === undefined) issue([], `mechanism ${s.mechanism} needs username and password (OUTBOX_KAFKA_SASL_USERNAME, OUTBOX_KAFKA_SASL_PASSWORD)`);
  } else if (s.mechanism === 'oauthbearer') {
    const sources = [o.token !== undefined, o.tokenUrl !== undefined, o.provider !== undefined].filter(Boolean).length;
    if (sources !== 1) issue(['oauthbearer'], 'mechanism oauthbearer takes exactly one of token (OUTBOX_KAFKA_SASL_OAUTHBEARER_TOKEN), tokenUrl with clientId and clientSecret, or provider (in code)');
    if (o.tokenUrl !== undefined && (o.clientId === undefined || o.clientSecret === undefined)) {
      issue(['oauthbearer'], 'tokenUrl needs clientId and clientSecret (OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_ID, OUTBOX_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET)');
    }
  } else if (s.mechanism === 'aws-msk-iam' && s.aws.region === undefined) {
    issue(['aws', 'region'], "mechanism aws-msk-iam needs the cluster's region (OUTBOX_KAFKA_SASL_AWS_REGION, e.g. eu-west-1)");
  } else if (s.mechanism === undefined && (s.username !== undefined || s.password !== undefined)) {
    // The one case kept from before: credentials without a mechanism would silently go unused.
    issue([], 'username and password need a mechanism (OUTBOX_KAFKA_SASL_MECHANISM: plain, scram-sha-256 or scram-sha-512)');
  }
}

/**
 * SASL authentication to the brokers: PLAIN and SCRAM with username and password; OAUTHBEARER with a
 * token, a client-credentials grant or a provider function; aws-msk-iam (OAUTHBEARER with a token from
 * AWS's signer, an optional package). docs/configuration.md, "Kafka authentication".
 */
export const kafkaSaslSchema = z
  .object({
    mechanism: z.enum(SASL_MECHANISMS).optional(),
    username: z.string().min(1).optional(),
    password: secret,
    oauthbearer: kafkaOAuthBearerSchema.prefault({}),
    aws: kafkaAwsSchema.prefault({}),
  })
  .strict()
  .superRefine(saslSettingsMatch);

export const kafkaSchema = z
  .object({
    brokers: z.array(z.string().min(1)).min(1).default([...stackUrls.kafkaBrokers]),
    clientId: z.string().min(1).default('outbox-router'),
    ssl: kafkaSslSchema.prefault({}),
    sasl: kafkaSaslSchema.prefault({}),
  })
  .strict();

/**
 * `https://user:pass@host` works, but the credentials then travel with the URL into messages,
 * `--json` output and logs: move them to username/password, which are redacted everywhere.
 */
export function withoutUrlCredentials<T extends { url: string; username?: string | undefined; password?: string | undefined }>(settings: T): T {
  let parsed: URL;
  try {
    parsed = new URL(settings.url);
  } catch {
    return settings;
  }
  if (!parsed.username && !parsed.password) return settings;
  const username = settings.username ?? (decodeURIComponent(parsed.username) || undefined);
  const password = settings.password ?? (decodeURIComponent(parsed.password) || undefined);
  parsed.username = '';
  parsed.password = '';
  return { ...settings, url: parsed.toString().replace(/\/+$/, ''), username, password };
}

export const registrySchema = z
  .object({
    url: z.string().url().default(stackUrls.registry),
    username: z.string().min(1).optional(),
    password: secret,
    /** PEM CA bundle for an https registry signed by a private CA. */
    caFile: filePath.optional(),
    rejectUnauthorized: z.boolean().default(true),
  })
  .strict()
  .transform(withoutUrlCredentials);

export const connectSchema = z
  .object({
    url: z.string().url().default(stackUrls.connect),
    /**
     * Other workers of the same Connect cluster, tried in order when `url` does not answer (no response at
     * all: refused, reset, timed out; an HTTP error is an answer). Any worker serves the whole REST API
     * and forwards writes to the leader, so with two workers and no load balancer in front, losing the
     * one `url` names must not blind `connector:*`, the watchdog's supervisor and `outbox status`.
     */
    fallbackUrls: z.array(z.string().url()).default([]),
    username: z.string().min(1).optional(),
    password: secret,
    requestTimeoutMs: z.number().int().positive().default(30_000),
    /** PEM CA bundle for an https Connect REST endpoint signed by a private CA. */
    caFile: filePath.optional(),
    rejectUnauthorized: z.boolean().default(true),
  })
  .strict()
  .transform(withoutUrlCredentials);

export const connectorSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-" only').default('outbox-connector'),
    slotName: slotName.default('outbox_slot'),
    /** Debezium's topic.prefix: names the heartbeat topic and Connect's internal naming. */
    topicPrefix: z.string().regex(/^[A-Za-z0-9._-]+$/).default('outbox'),
    /** Routed topics: `${routedByValue}` is the row's aggregate_type. */
    topicReplacement: z.string().includes('${routedByValue}').default('outbox.event.${routedByValue}'),
    /**
     * How Connect gets the CDC role's password, as a config-provider reference resolved inside the
     * worker: it never appears in the stored connector config. The local stack's worker has
     * OUTBOX_CDC_PASSWORD in its environment.
     */
    passwordRef: z.string().regex(/^\$\{(env|file):[^}]+\}$/, 'a config provider reference such as ${env:OUTBOX_CDC_PASSWORD} or ${file:/path:key}').default('${env:OUTBOX_CDC_PASSWORD}'),
    /**
     * Debezium's `database.sslrootcert`: the CA file as the Connect worker's machine sees it. Unset:
     * database.sslRootCert (the same path, right when Connect shares the machine or a mounted secret);
     * with neither and TLS verifying, Java's own truststore (`database.sslfactory`).
     */
    sslRootCert: z.string().min(1).optional(),
    heartbeatIntervalMs: z.number().int().nonnegative().default(10_000),
    /**
     * Debezium's idle sleep in the WAL reader and its wait for a batch to fill (Debezium's default 500 ms):
     * the latency floor. Each poll also spins for about a millisecond at its end, so an idle connector costs
     * about 1 / (pollIntervalMs + 1) of a core (measured in docs/connector.md, "Latency settings").
     */
    pollIntervalMs: z.number().int().positive().default(5),
    /**
     * Debezium's max.batch.size: a poll returns when this many records are queued, or at pollIntervalMs.
     * 1 returns each record at once (lowest latency at low rates, but a poll and a producer request per
     * record: measured, the per-event pipeline fell behind at 2,000 events/s on 2 cores where 2048 kept up).
     */
    maxBatchSize: z.number().int().positive().default(2048),
    maxQueueSize: z.number().int().positive().default(8192),
    /** Connect producer's linger.ms: 0, as its one request in flight batches records at high rates anyway. */
    producerLingerMs: z.number().int().nonnegative().default(0),
    /**
     * Exactly-once delivery to Kafka (KIP-618): the connector asks for `exactly.once.support=required`
     * and `transaction.boundary=poll`, so each batch Debezium returns and its source offset commit in
     * one Kafka transaction. Needs `exactly.once.source.support=enabled` on every Connect worker
     * (`connector:deploy` refuses with CONNECT_EXACTLY_ONCE_DISABLED otherwise); consumers must read
     * with read_committed (the router does). docs/connector.md has the measured cost.
     */
    exactlyOnce: z.boolean().default(false),
    /**
     * Debezium's `slot.failover` (PostgreSQL 17+ failover slots: the slot is synchronized to standbys with
     * sync_replication_slots=on and survives a failover). `auto` and `on` render slot.failover=true, which
     * Debezium applies where the server is 17+ and ignores before; `on` also makes connector:deploy warn
     * on an older server; `off` leaves it out. Only a slot Debezium creates gets it: an existing slot is not
     * altered (connector:deploy says so and how; docs/connector.md, "Failover slots").
     */
    slotFailover: z.enum(['auto', 'on', 'off']).default('auto'),
    deployTimeoutMs: z.number().int().positive().default(90_000),
  })
  .strict();

export const outboxConfigSchema = z
  .object({
    database: databaseSchema.prefault({}),
    outbox: outboxTablesSchema.prefault({}),
    roles: rolesSchema.prefault({}),
    kafka: kafkaSchema.prefault({}),
    registry: registrySchema.prefault({}),
    connect: connectSchema.prefault({}),
    connector: connectorSchema.prefault({}),
    router: routerSchema.prefault({}),
    watchdog: watchdogSchema.prefault({}),
    relay: relaySchema.prefault({}),
    console: consoleSchema.prefault({}),
    acls: aclsSchema.prefault({}),
  })
  .strict()
  .superRefine(distinctRoleNames)
  .transform(withLocalRolePasswords);

export type OutboxOptions = z.input<typeof outboxConfigSchema>;
export type OutboxConfig = Readonly<z.output<typeof outboxConfigSchema>>;
