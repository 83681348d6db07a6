import { z } from 'zod';
import { STACK_HOST, STACK_PORTS } from './local-stack';

/**
 * Settings of `outbox console` (src/console), the operator's web page and JSON admin API. Part of the
 * root schema as `console`. The credentials are secrets (their keys match the redaction rule, so
 * `outbox config print` and every log show them as [redacted]); they never reach the page or the API.
 */
export const consoleSchema = z
  .object({
    /** Address of the page, the API and the probes: loopback by default. Another address needs credentials. */
    host: z.string().min(1).default(STACK_HOST),
    port: z.number().int().min(0).max(65535).default(STACK_PORTS.console),
    /** A bearer token (`Authorization: Bearer …`, or typed into the page's sign-in form); its operator is `token` in the audit log. */
    token: z.string().min(16, 'at least 16 characters (e.g. `openssl rand -hex 32`)').optional(),
    /** Basic-auth credentials; the username is the operator named in the audit log. Set both or neither. */
    username: z.string().min(1).optional(),
    password: z.string().min(8, 'at least 8 characters').optional(),
    /** No actions at all: the page shows none and the API refuses them. Forced when no credentials are set. */
    readOnly: z.boolean().default(false),
    /** One JSON line per action (who, what, when, result), appended and flushed before the action's result is returned. */
    auditLog: z.string().min(1).default('outbox-console-audit.jsonl'),
    /**
     * Payload fields masked in the page and the API: a name (`email`) matches that key at any depth, a
     * dotted path (`customer.email`, `*` for any one key) matches from the payload's root. The writer's
     * extra headers (the `headers` JSON object) are masked by the same rules.
     */
    sensitiveFields: z.array(z.string().min(1)).default([]),
    /** How often the console samples the pipeline (status, slot, lags, the router's latency histogram). */
    sampleIntervalMs: z.number().int().min(1_000).default(10_000),
    /** How much of those samples the charts keep (in memory; a restarted console starts empty). */
    historyMs: z.number().int().min(60_000).max(24 * 3_600_000).default(3_600_000),
    /** Dead letters kept per dead-letter topic, the newest (older ones stay in the topic; `dlq:replay --dry-run` lists them all). */
    dlqLimit: z.number().int().min(1).max(100_000).default(2_000),
    /** The router's /metrics, for the commit → handled latency chart (default: router.metricsHost and router.metricsPort). */
    routerMetricsUrl: z.string().url().optional(),
    /** Host names (with port) the page may be reached by besides the bound address and localhost, e.g. behind a proxy. */
    allowedHosts: z.array(z.string().min(1)).default([]),
    /** A sign-in (token form) lasts this long. */
    sessionTtlMs: z.number().int().min(60_000).default(12 * 3_600_000),
  })
  .strict()
  .refine((c) => (c.username === undefined) === (c.password === undefined), { message: 'username and password are set together, or not at all', path: ['password'] });

export type ConsoleConfig = z.output<typeof consoleSchema>;
