/**
 * The Dockerfile, checked statically: Debian bookworm packages no Dockerfile linter (no hadolint). What is
 * checked is what the code and package.json decide: the CLI entry point, the ports, the assets, the non-root
 * user. The image is also built and run, where a Docker engine is reachable: test/integration/container-image.test.ts.
 */
import { outboxConfigSchema } from '../../../src/config';
import { STACK_PORTS } from '../../../src/config/local-stack';
import { dockerfileInstructions, envFor, read, SERVICES } from './files';

const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string>; files: string[]; engines: { node: string } };
const instructions = dockerfileInstructions(read('Dockerfile'));
const froms = instructions.filter((i) => i.keyword === 'FROM');
const last = froms.length - 1;
const runtime = instructions.filter((i) => i.stage === last);
const build = instructions.filter((i) => i.stage === 0);
const defaults = outboxConfigSchema.parse({});

/** `["a", "b"]` (exec form) as an array. */
const execForm = (args: string): string[] => JSON.parse(args) as string[];

describe('Dockerfile', () => {
  it('reads its instructions (parser self-check)', () => {
    expect(dockerfileInstructions('# c\nFROM a AS b\nRUN x \\\n  # inner\n  && y\nUSER 1:1\n')).toEqual([
      { keyword: 'FROM', args: 'a AS b', stage: 0 },
      { keyword: 'RUN', args: 'x && y', stage: 0 },
      { keyword: 'USER', args: '1:1', stage: 0 },
    ]);
  });

  it('is multi-stage: a build stage that runs npm ci and npm run build, a runtime stage from the same Node line', () => {
    expect(froms.length).toBeGreaterThanOrEqual(2);
    expect(froms[0]?.args).toMatch(/\sAS\s+build$/i);
    expect(build.filter((i) => i.keyword === 'RUN').map((i) => i.args)).toEqual(expect.arrayContaining([expect.stringMatching(/^npm ci\b/), 'npm run build']));
    // The base image's Node major satisfies package.json "engines".
    const major = Number(/^node:(\d+)/.exec(froms[last]?.args ?? '')?.[1]);
    expect(major).toBeGreaterThanOrEqual(Number(/>=\s*(\d+)/.exec(pkg.engines.node)?.[1]));
    expect(froms[0]?.args.split(/\s+/)[0]).toBe(froms[last]?.args.split(/\s+/)[0]);
  });

  it('runtime: production dependencies only, dist/ from the build stage, and every asset package.json ships', () => {
    const runs = runtime.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /^npm ci\b.*--omit=dev/.test(r))).toBe(true);
    expect(runs.some((r) => /npm run build/.test(r))).toBe(false);
    const copies = runtime.filter((i) => i.keyword === 'COPY').map((i) => i.args.split(/\s+/));
    expect(copies).toContainEqual(['--from=build', '/app/dist', './dist']);
    const copied = copies.filter((c) => !c[0]?.startsWith('--')).flatMap((c) => c.slice(0, -1));
    // docs/ is for readers of the package and monitoring/ for Prometheus and Grafana, not for the process.
    for (const entry of pkg.files.filter((f) => f !== 'dist' && f !== 'docs' && f !== 'monitoring')) expect([entry, copied.includes(entry)]).toEqual([entry, true]);
    expect(copied).toContain('package.json');
  });

  it('runs as a non-root user, set after the last FROM', () => {
    const users = runtime.filter((i) => i.keyword === 'USER').map((i) => i.args);
    expect(users.length).toBeGreaterThan(0);
    const user = users[users.length - 1] as string;
    const [name, group] = user.split(':');
    expect(['root', '0']).not.toContain(name);
    expect(name).toMatch(/^[1-9]\d*$/); // numeric, so Kubernetes' runAsNonRoot can verify it
    if (group !== undefined) expect(group).not.toBe('0');
  });

  it('ENTRYPOINT runs the `outbox` CLI of package.json "bin"', () => {
    const entrypoints = runtime.filter((i) => i.keyword === 'ENTRYPOINT');
    expect(entrypoints).toHaveLength(1);
    expect(execForm(entrypoints[0]?.args ?? '[]')).toEqual(['node', `/app/${pkg.bin.outbox}`]);
    const workdir = runtime.filter((i) => i.keyword === 'WORKDIR').map((i) => i.args);
    expect(workdir[workdir.length - 1]).toBe('/app');
  });

  it('EXPOSEs exactly the metrics ports of the config defaults (STACK_PORTS)', () => {
    const exposed = runtime.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map(Number);
    const ports = SERVICES.map((s) => defaults[s].metricsPort);
    expect(ports).toEqual([STACK_PORTS.routerMetrics, STACK_PORTS.watchdogMetrics, STACK_PORTS.relayMetrics]);
    expect([...exposed].sort()).toEqual([...ports].sort());
  });

  it('binds every service\'s health listener to all interfaces through the variables the config reads', () => {
    const env = Object.fromEntries(
      runtime
        .filter((i) => i.keyword === 'ENV')
        .flatMap((i) => i.args.split(/\s+/))
        .map((pair) => pair.split('=', 2) as [string, string]),
    );
    for (const service of SERVICES) {
      const name = envFor([service, 'metricsHost']);
      expect([name, env[name]]).toEqual([name, '0.0.0.0']);
    }
  });

  it('.dockerignore lets in every file the Dockerfile copies from the context', () => {
    const lines = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(lines[0]).toBe('*');
    const allowed = new Set(lines.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, '')));
    const sources = instructions
      .filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    for (const source of sources) expect([source, allowed.has(source.replace(/\/$/, ''))]).toEqual([source, true]);
  });
});
