import { Command, Option } from 'commander';
import { SingleBar, Presets } from 'cli-progress';
import { formatDemo, runDemo } from './run-demo';
import { OutboxError } from 'outbox-router/errors';
import { configFrom, withConfigOption } from 'outbox-router/cli';
import { loadConfig, type OutboxConfig } from 'outbox-router/config';
import { resolveStackConfig } from '../stack/config';
import { secureOutboxOptions } from '../stack/secure/secure-config';
import { downSecureStack, secureCerts, secureStackPaths, secureStackStatus, upSecureStack } from '../stack/secure/secure-stack';
import type { DemoStack } from './types';

/**
 * `demo --profile secure`: the same demo on the secure stack, every hop over TLS with a credential. One
 * process plays every part, so it connects to Kafka as the stack's admin (a super user); the parts as
 * their own principals are what test/integration/secure-*.test.ts run.
 */
function secureDemo(): { config: OutboxConfig; stack: DemoStack } {
  const stackConfig = resolveStackConfig({});
  const certs = secureCerts(secureStackPaths(stackConfig));
  const config = loadConfig({ env: {}, overrides: { ...secureOutboxOptions(certs, 'app', 'outbox-admin'), router: { consumer: 'outbox-demo' } } });
  const stack: DemoStack = {
    ready: async () => (await secureStackStatus(stackConfig)).every((s) => s.ready),
    up: async (onStep) => void (await upSecureStack(stackConfig, (e) => onStep(e.detail))),
    down: (onStep) => downSecureStack(stackConfig, false, (e) => onStep(e.detail)),
  };
  return { config, stack };
}
import { action, loggerFor } from 'outbox-router/cli';

function positive(flag: string, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0 || n > max) throw new OutboxError('FLAG_INVALID', `${flag} must be a number above 0${max < Number.MAX_SAFE_INTEGER ? ` and at most ${max}` : ''}, got ${JSON.stringify(value)}.`);
    return n;
  };
}

export function demoCommand(): Command {
  return withConfigOption(
    new Command('demo').description(
      'The whole pipeline on the local stack in one command: start the stack if needed, provision Postgres, register the schemas, deploy the connector, ' +
        "run the router (example handlers) and the slot-lag watchdog in-process, write orders through the source article's CreateOrder (some rolled back on purpose), and check " +
        'from the database that every committed event was handled exactly once and no rolled-back one was seen. Exits 1 if not.',
    ),
  )
    .addOption(new Option('--events <n>', 'orders to write').default(2000).argParser(positive('--events', 1_000_000)))
    .addOption(new Option('--rate <r>', 'orders per second').default(200).argParser(positive('--rate', 20_000)))
    .addOption(new Option('--rollback-share <x>', 'share of transactions rolled back on purpose').default(0.1).argParser(positive('--rollback-share', 0.5)))
    .addOption(
      new Option('--warmup-seconds <s>', 'unmeasured orders at --rate first, so a cold stack reports what a warm one does (0 skips)')
        .default(20)
        .argParser((value: string) => (value.trim() === '0' ? 0 : positive('--warmup-seconds', 600)(value))),
    )
    .addOption(new Option('--profile <profile>', 'secure: run on the secure stack (TLS and a credential on every hop; docs/local-stack.md)').choices(['secure']))
    .option('--keep', 'leave the stack running at the end (it always stays up if it was running before)', false)
    .option('--json', 'print the summary as JSON', false)
    .action(
      action(async (opts: { events: number; rate: number; rollbackShare: number; warmupSeconds: number; keep: boolean; json: boolean; profile?: 'secure' }, command: Command) => {
        const log = loggerFor(command);
        const secure = opts.profile === 'secure' ? secureDemo() : undefined;
        const config = secure?.config ?? configFrom(command);
        const tty = Boolean(process.stderr.isTTY);
        const bars = new Map<string, SingleBar>();
        let lastLine = 0;
        const progress = (phase: 'write' | 'handle', done: number, total: number) => {
          if (tty) {
            let bar = bars.get(phase);
            if (!bar) {
              for (const other of bars.values()) other.stop();
              bar = new SingleBar({ format: `${phase === 'write' ? 'writing orders ' : 'handled events '} [{bar}] {value}/{total} {percentage}% | {duration}s`, stream: process.stderr }, Presets.shades_classic);
              bar.start(total, 0);
              bars.set(phase, bar);
            }
            bar.setTotal(total);
            bar.update(done);
            if (done >= total) bar.stop();
          } else if (Date.now() - lastLine > 1000 || done >= total) {
            lastLine = Date.now();
            log.info({ phase, done, total }, `${phase}: ${done}/${total}`);
          }
        };
        const summary = await runDemo({ config, events: Math.round(opts.events), rate: opts.rate, rollbackShare: opts.rollbackShare, warmupSeconds: opts.warmupSeconds, keep: opts.keep, log, progress, ...(secure ? { stack: secure.stack } : {}) });
        for (const bar of bars.values()) bar.stop();
        process.stdout.write(opts.json ? `${JSON.stringify(summary, null, 2)}\n` : `\n${formatDemo(summary)}\n`);
        return summary.ok ? 0 : 1;
      }),
    );
}
