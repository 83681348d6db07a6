#!/usr/bin/env node
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, Option } from 'commander';
import { action, loggerFor } from 'outbox-router/cli';
import { cliErrorText, OutboxError } from 'outbox-router/errors';
import { PROJECT_ROOT } from '../stack/paths';
import { PROFILES, runChaos } from './run-chaos';
import type { ChaosReport, FaultKind, Pipeline } from './types';

export function formatChaos(reports: readonly ChaosReport[]): string {
  const lines: string[] = [];
  for (const r of reports) {
    lines.push(
      `chaos ${r.pipeline}${r.exactlyOnce ? ' (exactly-once)' : ''}: ${r.ok ? 'PASSED' : 'FAILED'} in ${r.seconds} s — ${r.events.committed} committed, ${r.events.rolledBack} rolled back on purpose, ` +
        `${r.events.notCommittedOnError} failed by a fault, ${r.events.ambiguousCommits} ambiguous commits resolved`,
      `  lost ${r.lost}, phantom ${r.phantom}, double-applied ${r.doubleApplied}, order violations ${r.orderViolations}`,
      `  duplicates delivered ${r.duplicatesDelivered} (of ${r.recordsOnTopic} records on the topic), slot lag after ${r.slotLagBytes ?? 'n/a'} bytes, commit → handled p50 ${r.commitToHandledMs.p50} ms, p99 ${r.commitToHandledMs.p99} ms`,
      ...r.faults.map((f) => `  fault ${f.kind.padEnd(17)} at ${String(f.atCommitted).padStart(6)} committed → recovered in ${f.recoveryMs === null ? 'NOT RECOVERED' : `${(f.recoveryMs / 1000).toFixed(1)} s`}${f.notes.length ? `  (${f.notes.join('; ')})` : ''}`),
      ...r.connectorRestarts.map((x) => `  connector restarted by the supervisor: ${x}`),
    );
  }
  return lines.join('\n');
}

const FAULT_KINDS: readonly FaultKind[] = ['kill-router', 'kill-connect', 'kill-relay', 'restart-kafka', 'restart-postgres'];

/** `--events <n>`: a whole number above 0 (parseInt would quietly turn "many" into the profile's count). */
function eventCount(value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) throw new OutboxError('FLAG_INVALID', `--events must be a whole number above 0, got ${JSON.stringify(value)}; e.g. --events 2000.`);
  return Number(value);
}

/** `--faults <kinds>`: known fault kinds only (a misspelt one would quietly inject nothing). */
function faultKinds(value: string): FaultKind[] {
  const kinds = value.split(',').map((f) => f.trim());
  const bad = kinds.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (bad.length) throw new OutboxError('FLAG_INVALID', `--faults ${JSON.stringify(value)}: ${bad.join(', ')} is not a fault kind; use ${FAULT_KINDS.join(', ')}.`);
  return kinds as FaultKind[];
}

export function program(): Command {
  return new Command('outbox-chaos')
    .description(
      'The chaos run (npm run test:chaos): concurrent writers with rolled-back transactions, while Kafka Connect (or the relay) is killed twice, Kafka and PostgreSQL ' +
        'are restarted, and the router is killed three times; then checks lost 0, phantom 0, double-applied 0, order violations 0. RESTARTS SERVICES OF THE LOCAL STACK: ' +
        'run it alone, never beside the test suite.',
    )
    .addOption(new Option('--profile <name>', 'full: 20,000 events over 200 aggregates; ci: 6,000').choices(['full', 'ci']).default('full'))
    .option('--pipeline <list>', 'cdc, relay or both (comma-separated)', 'cdc,relay')
    .addOption(new Option('--faults <kinds>', `only these fault kinds (comma-separated: ${FAULT_KINDS.join(', ')}); default all`).argParser(faultKinds))
    .addOption(new Option('--events <n>', 'override the profile\'s event count').argParser(eventCount))
    .option(
      '--exactly-once',
      'CDC: deploy the connector with connector.exactlyOnce (KIP-618 transactions, read with read_committed); the stack\'s Connect worker must run with ' +
        'exactly.once.source.support=enabled (OUTBOX_STACK_EXACTLY_ONCE=enabled at its start), else the deploy fails with CONNECT_EXACTLY_ONCE_DISABLED',
      false,
    )
    .option('-o, --output <file>', 'where to write the JSON report', join(PROJECT_ROOT, 'reports', 'chaos.json'))
    .addOption(new Option('--log-level <level>').choices(['debug', 'info', 'warn', 'error']).default('info'))
    .addOption(new Option('--log-format <format>').choices(['json', 'pretty']))
    .action(
      action(async (opts: { profile: 'full' | 'ci'; pipeline: string; output: string; faults?: FaultKind[]; events?: number; exactlyOnce: boolean }, command: Command) => {
        const pipelines = opts.pipeline.split(',').map((p) => p.trim());
        const bad = pipelines.filter((p) => p !== 'cdc' && p !== 'relay');
        if (bad.length) throw new OutboxError('FLAG_INVALID', `--pipeline ${JSON.stringify(opts.pipeline)}: ${bad.join(', ')} is not a pipeline; use cdc, relay or cdc,relay.`);
        if (opts.exactlyOnce && !pipelines.includes('cdc')) {
          throw new OutboxError('FLAG_INVALID', `--exactly-once is a setting of the CDC connector; --pipeline ${JSON.stringify(opts.pipeline)} has no cdc (use --pipeline cdc).`);
        }
        const log = loggerFor(command);
        const reports: ChaosReport[] = [];
        for (const pipeline of pipelines as Pipeline[]) {
          log.info(`chaos ${pipeline}: ${JSON.stringify(PROFILES[opts.profile])}`);
          const profile = { ...PROFILES[opts.profile], ...(opts.events ? { events: opts.events } : {}) };
          const report = await runChaos({ pipeline, profile, only: opts.faults, exactlyOnce: opts.exactlyOnce, log });
          reports.push(report);
          mkdirSync(dirname(opts.output), { recursive: true });
          writeFileSync(opts.output, `${JSON.stringify(reports, null, 2)}\n`);
        }
        process.stdout.write(`${formatChaos(reports)}\n\nreport: ${opts.output}\n`);
        return reports.every((r) => r.ok) ? 0 : 1;
      }),
    );
}

if (require.main === module) {
  program().parseAsync(process.argv).catch((error: unknown) => {
    process.stderr.write(cliErrorText(error));
    process.exitCode = 1;
  });
}
