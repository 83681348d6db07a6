import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Command, Option } from 'commander';
import { matrixEntry, POSTGRES_MATRIX, startMatrixCluster, stopMatrixCluster } from './postgres-versions';
import { createStack, SERVICE_NAMES, serviceNames, type ServiceName, type StepEvent } from './stack';
import { STACK_PROFILES, type StackProfile } from './settings';
import { tailLines } from './processes';
import { failoverNote } from './cluster-postgres';
import { action, formatMs, loggerFor } from 'outbox-router/cli';
import { resolveStackConfig } from './config';
import { downSecureStack, secureStackStatus, upSecureStack } from './secure/secure-stack';

/** `secure` is a stack of its own (ports, state folder) beside the plain one, not a shape of it: see secure/secure-settings.ts. */
const PROFILE_CHOICES = [...STACK_PROFILES, 'secure'] as const;
type ProfileChoice = (typeof PROFILE_CHOICES)[number];
const isSecure = (profile: string | undefined) => profile === 'secure';
const secureOption = () => new Option('--profile <profile>', 'secure: act on the secure stack (its own ports and state folder) instead of the plain one').choices(['secure']);

export function stackCommand(): Command {
  const stack = new Command('stack').description(
    'Run the local stack as plain processes (no Docker): PostgreSQL on 55432, Kafka on 9092, Kafka Connect + Debezium on 8083, Apicurio Registry on 8081. ' +
      '`stack up --profile cluster`: three brokers (9092, 9192, 9292) and two Connect workers (8083, 8084) instead.',
  );

  stack
    .command('up')
    .description('Start the stack (idempotent): downloads jars into the cache on first use, then waits until every service is really ready.')
    .addOption(
      new Option('--profile <profile>', 'single: one broker, one Connect worker; cluster: three brokers, two workers; secure: TLS and authentication on every hop, on ports of its own beside the plain stack (docs/local-stack.md). Recorded: later commands keep it (env OUTBOX_STACK_PROFILE)')
        .choices([...PROFILE_CHOICES]),
    )
    .action(
      action(async (opts: { profile?: ProfileChoice }, command: Command) => {
        const log = loggerFor(command);
        const onStep = (e: StepEvent) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`);
        if (isSecure(opts.profile)) {
          const { totalMs, paths } = await upSecureStack(resolveStackConfig({}), onStep);
          log.info({ step: 'up', ms: totalMs }, `secure stack ready in ${formatMs(totalMs)} (state in ${paths.stateDir}; clients trust ${paths.stateDir}/tls/ca.crt)`);
          return;
        }
        const s = createStack(opts.profile ? { profile: opts.profile as StackProfile } : {});
        const { totalMs, startedAny } = await s.up((e: StepEvent) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`));
        log.info({ step: 'up', ms: totalMs }, `stack (${s.profile} profile) ready in ${formatMs(totalMs)}${startedAny ? '' : ' (everything was already running)'}`);
      }),
    );

  stack
    .command('down')
    .description('Stop what `stack up` started (by its pid files); other processes on the same ports are left alone.')
    .option('--clean', 'also delete the stack\'s data, logs and configs (the jar cache is kept)', false)
    .addOption(secureOption())
    .action(
      action(async (opts: { clean: boolean; profile?: string }, command: Command) => {
        const log = loggerFor(command);
        if (isSecure(opts.profile)) {
          await downSecureStack(resolveStackConfig({}), opts.clean, (e) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`));
          return;
        }
        await createStack().down({ clean: opts.clean }, (e) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`));
      }),
    );

  stack
    .command('status')
    .description('Show each service: running, ready, pid, ports, memory and log file. Exits 1 unless all are ready.')
    .option('--json', 'print JSON for scripts', false)
    .addOption(secureOption())
    .action(
      action(async (opts: { json: boolean; profile?: string }) => {
        const secure = isSecure(opts.profile);
        const stack = secure ? { profile: 'secure' } : createStack();
        const statuses = secure ? await secureStackStatus(resolveStackConfig({})) : await (stack as ReturnType<typeof createStack>).status();
        const totalRss = statuses.reduce((sum, s) => sum + s.rssBytes, 0);
        if (opts.json) {
          process.stdout.write(`${JSON.stringify({ profile: stack.profile, services: statuses, totalRssBytes: totalRss }, null, 2)}\n`);
        } else {
          const rows = statuses.map((s) => [
            s.name,
            s.ready ? 'ready' : s.running ? 'NOT READY' : 'stopped',
            s.pid ? String(s.pid) : '-',
            s.ports.join(','),
            s.rssBytes ? `${Math.round(s.rssBytes / 2 ** 20)} MB` : '-',
            s.detail,
          ]);
          printTable(['service', 'state', 'pid', 'ports', 'rss', 'detail'], rows);
          process.stdout.write(`total RSS ${Math.round(totalRss / 2 ** 20)} MB (${stack.profile} profile)\n`);
        }
        return statuses.every((s) => s.ready) ? 0 : 1;
      }),
    );

  stack
    .command('logs')
    .description('Print the last lines of the services\' logs (all, or the ones named).')
    .argument('[services...]', `any of ${SERVICE_NAMES.join(', ')}; on the cluster profile ${serviceNames('cluster').filter((n) => !SERVICE_NAMES.includes(n)).join(', ')} (kafka, connect: all of them)`)
    .addOption(new Option('-n, --lines <n>', 'lines per log').default(40).argParser((v) => Number.parseInt(v, 10)))
    .option('-f, --follow', 'keep printing as the logs grow (tail -F)', false)
    .action(
      action(async (names: string[], opts: { lines: number; follow: boolean }) => {
        const s = createStack();
        const known = new Set<string>([...serviceNames('single'), ...serviceNames('cluster')]);
        const unknown = names.filter((n) => !known.has(n));
        if (unknown.length > 0) {
          process.stderr.write(`outbox: unknown service ${unknown.join(', ')}; choose from ${serviceNames(s.profile).join(', ')}\n`);
          return 2;
        }
        const chosen = names.length ? [...new Set(names.flatMap((n) => s.resolveServices(n as ServiceName)))] : serviceNames(s.profile);
        const files = chosen.map((n) => ({ name: n, file: s.logFile(n) }));
        if (opts.follow) {
          const child = spawn('tail', ['-n', String(opts.lines), '-F', ...files.map((f) => f.file)], { stdio: 'inherit' });
          await new Promise((resolve) => child.on('exit', resolve));
          return;
        }
        for (const { name, file } of files) {
          process.stdout.write(`==> ${name}: ${file}${existsSync(file) ? '' : ' (no log yet)'}\n`);
          for (const line of tailLines(file, opts.lines)) process.stdout.write(`${line}\n`);
        }
      }),
    );
  stack
    .command('postgres')
    .description(
      `Start or stop a PostgreSQL cluster of the version matrix beside the stack: ${POSTGRES_MATRIX.map((e) => `${e.version} on ${e.port}`).join(', ')}. ` +
        'The server comes from Maven Central (io.zonky.test.postgres embedded binaries) into the jar cache; the cluster has the stack\'s superuser, settings and `app` database.',
    )
    .argument('<version>', `one of ${POSTGRES_MATRIX.map((e) => e.version).join(', ')}, or its major`)
    .option('--down', 'stop it instead', false)
    .option('--clean', 'with --down: also delete its data and unpacked server', false)
    .action(
      action(async (version: string, opts: { down: boolean; clean: boolean }, command: Command) => {
        const log = loggerFor(command);
        const { paths } = createStack();
        if (opts.down) {
          const ran = stopMatrixCluster(paths, version, { clean: opts.clean });
          log.info({ step: 'postgres' }, `PostgreSQL ${matrixEntry(version).version}: ${ran ? 'stopped' : 'was not running'}${opts.clean ? '; its folder is removed' : ''}`);
          return;
        }
        const started = Date.now();
        await startMatrixCluster(paths, version, (detail) => log.info({ step: 'postgres', ms: Date.now() - started }, detail));
      }),
    );
  stack
    .command('failover')
    .description(
      'Cluster profile: fail the PostgreSQL primary over to its standby, as a crash would: SIGKILL of the primary, promotion of the standby, the proxy on ' +
        '55432 moved to it (every connection to the old primary closed). Prints the LSNs and the standby\'s slots before promotion. The old primary stays ' +
        'down until `stack rebuild-standby` (or `stack up`) copies it back as the new standby.',
    )
    .option('--json', 'print the report as JSON', false)
    .action(
      action(async (opts: { json: boolean }, command: Command) => {
        const log = loggerFor(command);
        const report = await createStack().failoverPostgres((e) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`));
        if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        else process.stdout.write(`${failoverNote(report)}\n`);
      }),
    );

  stack
    .command('rebuild-standby')
    .description('Cluster profile: bring the PostgreSQL node that is not the primary back as its synchronous standby (a fresh copy of the primary), and make the primary wait for it again.')
    .action(
      action(async (_opts: unknown, command: Command) => {
        const log = loggerFor(command);
        const report = await createStack().rebuildStandby((e) => log.info({ step: e.step, ms: e.ms }, `${e.step}: ${e.detail} (${formatMs(e.ms)})`));
        log.info({ step: 'rebuild-standby', ms: report.ms }, `node ${report.standby} is the synchronous standby of node ${report.primary} (${report.method}) after ${formatMs(report.ms)}`);
      }),
    );
  return stack;
}

function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  process.stdout.write(`${line(header)}\n${rows.map(line).join('\n')}\n`);
}
