#!/usr/bin/env node
/**
 * `node build/scripts/docker/main.js [-- command …]`: starts a private Docker engine (./engine.ts), builds
 * the Dockerfile's base image in it without a registry (./base-image.ts), runs the command with
 * DOCKER_HOST pointing at that engine, and stops the engine afterwards, whatever the command did. The
 * exit code is the command's. Without a command it builds the base and reports how long each step took.
 * .ci/run runs the container-image integration test this way.
 */
import { spawn } from 'node:child_process';
import { Command } from 'commander';
import { action, loggerFor } from 'outbox-router/cli';
import { OutboxError } from 'outbox-router/errors';
import { defaultCacheDir } from '../stack/paths';
import { buildBaseImage } from './base-image';
import { dockerEnv, startEngine } from './engine';

const seconds = (since: number) => Number(((Date.now() - since) / 1000).toFixed(1));

function runCommand(argv: readonly string[], host: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1) as string[], { stdio: 'inherit', env: dockerEnv(host) });
    child.once('error', (error) => {
      process.stderr.write(`could not run ${argv[0]}: ${error.message}\n`);
      resolve(127);
    });
    child.once('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

const program = new Command('docker')
  .description(
    'Start a private Docker engine (overlay2 storage where the kernel allows, else vfs; no iptables, its own folders and socket under a temporary folder), build the Dockerfile\'s base image ' +
      'there from debootstrap and the npm registry\'s Node (cached in ~/.cache/outbox-router), run the command with DOCKER_HOST set, then stop the engine. ' +
      'Runs as root (dockerd; apt-get installs docker.io and debootstrap when missing).',
  )
  .argument('[command...]', 'what to run against the engine (after --), e.g. -- npx jest test/integration/container-image.test.ts')
  .option('--no-base', 'do not build the base image')
  .option('--storage-driver <driver>', 'overlay2, vfs, or auto: overlay2 when an overlay mount works here, else vfs', 'auto')
  .option('--cache-dir <dir>', 'where the Debian tarball, the Node binary and npm are cached', defaultCacheDir())
  .option('--log-format <format>', 'json or pretty', 'pretty')
  .option('--log-level <level>', 'log level', 'info')
  .action(
    action(async (argv: string[], opts: { base: boolean; cacheDir: string; storageDriver: string }, command: Command) => {
      const log = loggerFor(command);
      const detail = (line: string) => log.debug(line);
      const started = Date.now();
      if (!['overlay2', 'vfs', 'auto'].includes(opts.storageDriver)) throw new OutboxError('FLAG_INVALID', `--storage-driver ${JSON.stringify(opts.storageDriver)}: use overlay2, vfs or auto.`);
      const engine = await startEngine((line) => log.info(line), { storageDriver: opts.storageDriver as 'overlay2' | 'vfs' | 'auto' });
      const stop = () => void engine.stop().finally(() => process.exit(130));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      try {
        log.info({ seconds: seconds(started), host: engine.host, log: engine.logFile }, 'docker engine up');
        if (opts.base) {
          const t = Date.now();
          const base = await buildBaseImage({ host: engine.host, cacheDir: opts.cacheDir, log: detail });
          log.info({ ...base, sizeMb: Math.round(base.sizeBytes / 1e6), seconds: seconds(t) }, `base image ${base.tag} built (Node ${base.nodeVersion}${base.debootstrapped ? ', debootstrap ran' : ', Debian from the cache'})`);
        }
        if (argv.length === 0) return 0;
        const code = await runCommand(argv, engine.host);
        log.info({ code }, `${argv.join(' ')} exited`);
        return code;
      } finally {
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGTERM', stop);
        await engine.stop();
        log.info({ seconds: seconds(started) }, 'docker engine stopped');
      }
    }),
  );

void program.parseAsync(process.argv);
