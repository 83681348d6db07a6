#!/usr/bin/env node
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Command, Option } from 'commander';
import { action, loggerFor } from 'outbox-router/cli';
import { cliErrorText, OutboxError } from 'outbox-router/errors';
import { PROJECT_ROOT } from '../stack/paths';
import { FAULT_KINDS } from './faults';
import { profileFor, runChaos } from './run-chaos';
import type { ChaosReport, FaultKind, Pipeline, ProfileName } from './types';

export function formatChaos(reports: readonly ChaosReport[]): string {
  const lines: string[] = [];
  for (const r of reports) {
    lines.push(
      `chaos ${r.pipeline}${r.exactlyOnce ? ' (exactly-once)' : ''} on the ${r.topology} stack: ${r.ok ? 'PASSED' : 'FAILED'} in ${r.seconds} s — ${r.events.committed} committed, ${r.events.rolledBack} rolled back on purpose, ` +
        `${r.events.notCommittedOnError} failed by a fault, ${r.events.ambiguousCommits} ambiguous commits resolved, ${r.events.commitOrderInversions} committed ahead of an aggregate's transaction that began earlier`,
      `  lost ${r.lost}, phantom ${r.phantom}, double-applied ${r.doubleApplied}, order violations ${r.orderViolations}`,
      `  duplicates delivered ${r.duplicatesDelivered} (of ${r.recordsOnTopic} records on the topic, ${r.replayedRecordsOnTopic} of them replayed from the DLQ), slot lag after ${r.slotLagBytes ?? 'n/a'} bytes, commit → handled p50 ${r.commitToHandledMs.p50} ms, p99 ${r.commitToHandledMs.p99} ms`,
      `  handlers: ${r.handlerFailures.flakyEvents} events failed twice then applied; ${r.handlerFailures.poisonEvents} poison events parked ${r.handlerFailures.parkedAggregates} aggregates ` +
        `(${r.handlerFailures.eventsBehindPoison} events behind them); ${r.handlerFailures.replays} dlq:replay runs re-published ${r.handlerFailures.replayed}; parked rows at the end ${r.handlerFailures.parkedRowsAtEnd}` +
        `${r.handlerFailures.stillParkedAfterFirstReplay.length ? `; left parked by the first replay at the end: ${r.handlerFailures.stillParkedAfterFirstReplay.join(', ')}` : ''}` +
        `${r.handlerFailures.stillParked.length ? `; still parked: ${r.handlerFailures.stillParked.join(', ')}` : ''}`,
      ...r.faults.map((f) => `  fault ${f.kind.padEnd(17)} at ${String(f.atCommitted).padStart(6)} committed → recovered in ${f.recoveryMs === null ? 'NOT RECOVERED' : `${(f.recoveryMs / 1000).toFixed(1)} s`}${f.notes.length ? `  (${f.notes.join('; ')})` : ''}`),
      ...r.connectorRestarts.map((x) => `  connector restarted by the supervisor: ${x}`),
      ...(r.soak ? r.soak.verdicts.map((v) => `  soak ${v.key.padEnd(22)} middle third ${v.middle}, last third ${v.last} → ${v.flat ? 'flat' : 'GROWING'}`) : []),
    );
  }
  return lines.join('\n');
}

/** `--events <n>`: a whole number above 0 (parseInt would quietly turn "many" into the profile's count). */
function eventCount(value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) throw new OutboxError('FLAG_INVALID', `--events must be a whole number above 0, got ${JSON.stringify(value)}; e.g. --events 2000.`);
  return Number(value);
}

/** `--minutes <n>`: the soak profile's duration, a whole number above 0. */
function minutes(value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < 1) throw new OutboxError('FLAG_INVALID', `--minutes must be a whole number above 0, got ${JSON.stringify(value)}; e.g. --minutes 30.`);
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
      'The chaos run (npm run test:chaos): 8 concurrent writers on 200 shared aggregates (a hot few take 30% of the transactions; each transaction waits at ' +
        'random before its row lock and before COMMIT, so start order differs from commit order; 10% rolled back on purpose) feed CDC or the relay and two ' +
        'routers in one consumer group (4 lanes each). 2% of the handlers fail twice before they succeed; a few events are poison: dead-lettered, their ' +
        'keys parked, until the run fixes them and runs dlq:replay. Faults, one at a time under load: a router killed three times (the other keeps ' +
        'running), Connect (or the relay) killed twice, Kafka and PostgreSQL each stopped gracefully once and killed (SIGKILL; the postmaster, so crash ' +
        'recovery runs) once. Then: lost 0, phantom 0, double-applied 0, order violations (per aggregate, commit order) 0, nothing left parked. ' +
        'The soak profile writes 50 events/s for --minutes (30) with the faults spaced out, replays the DLQ every 2 minutes and samples table sizes, ' +
        'slot lag and the RSS of every Node process each minute: any that grows fails the run. On the cluster profile (stack up --profile cluster) the plan is the ' +
        'cluster\'s: SIGKILL of the broker leading the routed topic, then of the active KRaft controller, of the Connect worker running the task (twice; the ' +
        'relay instead for that pipeline), and two primary failovers (the primary killed, the standby promoted, the old primary rebuilt as the standby), each ' +
        'victim back only after recovery was measured. RESTARTS SERVICES OF THE LOCAL STACK: run it alone, never beside the test suite.',
    )
    .addOption(new Option('--profile <name>', 'full: 20,000 events; ci: 6,000 (both: at least, until every fault is recovered from); soak: --minutes at 50 events/s').choices(['full', 'ci', 'soak']).default('full'))
    .option('--pipeline <list>', 'cdc, relay or both (comma-separated)', 'cdc,relay')
    .addOption(new Option('--faults <kinds>', `only these fault kinds (comma-separated: ${FAULT_KINDS.join(', ')}); default all`).argParser(faultKinds))
    .addOption(new Option('--events <n>', 'override the profile\'s event count').argParser(eventCount))
    .option(
      '--exactly-once',
      'CDC: deploy the connector with connector.exactlyOnce (KIP-618 transactions, read with read_committed); the stack\'s Connect worker must run with ' +
        'exactly.once.source.support=enabled (OUTBOX_STACK_EXACTLY_ONCE=enabled at its start), else the deploy fails with CONNECT_EXACTLY_ONCE_DISABLED',
      false,
    )
    .addOption(new Option('--minutes <n>', 'the soak profile\'s duration (default 30)').argParser(minutes))
    .option('-o, --output <file>', 'where to write the JSON report', join(PROJECT_ROOT, 'reports', 'chaos.json'))
    .addOption(new Option('--log-level <level>').choices(['debug', 'info', 'warn', 'error']).default('info'))
    .addOption(new Option('--log-format <format>').choices(['json', 'pretty']))
    .action(
      action(async (opts: { profile: ProfileName; pipeline: string; output: string; faults?: FaultKind[]; events?: number; minutes?: number; exactlyOnce: boolean }, command: Command) => {
        const pipelines = opts.pipeline.split(',').map((p) => p.trim());
        const bad = pipelines.filter((p) => p !== 'cdc' && p !== 'relay');
        if (bad.length) throw new OutboxError('FLAG_INVALID', `--pipeline ${JSON.stringify(opts.pipeline)}: ${bad.join(', ')} is not a pipeline; use cdc, relay or cdc,relay.`);
        if (opts.minutes !== undefined && opts.profile !== 'soak') throw new OutboxError('FLAG_INVALID', `--minutes is for --profile soak; the ${opts.profile} profile runs until its events are written and every fault is recovered from.`);
        if (opts.exactlyOnce && !pipelines.includes('cdc')) {
          throw new OutboxError('FLAG_INVALID', `--exactly-once is a setting of the CDC connector; --pipeline ${JSON.stringify(opts.pipeline)} has no cdc (use --pipeline cdc).`);
        }
        const log = loggerFor(command);
        const reports: ChaosReport[] = [];
        for (const pipeline of pipelines as Pipeline[]) {
          const profile = profileFor(opts.profile, { events: opts.events, minutes: opts.minutes });
          log.info(`chaos ${pipeline}: ${JSON.stringify(profile)}`);
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
