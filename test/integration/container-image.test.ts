/**
 * The container image, built and run for real: ./Dockerfile is built, then the router, the watchdog and
 * the relay run from it against the local stack, each the way deploy/kubernetes/ declares it (user, group,
 * read-only root file system, dropped capabilities, no privilege escalation, the ConfigMap's settings
 * file mounted read-only, the manifest's args and env, the Secret's keys, its probes, its grace period).
 * Containers share the host's network (`--network host`): the probes and /metrics are read from outside.
 *
 * It needs a Docker engine (DOCKER_HOST). Without one it is skipped, and says why. In CI, .ci/run starts a
 * private engine with scripts/docker (which also builds the base image, since no registry is reachable):
 *   node build/scripts/docker/main.js -- npx jest --selectProjects integration test/integration/container-image.test.ts
 * OUTBOX_TEST_IMAGE names an image already built from ./Dockerfile: the test then checks and runs it
 * instead of building it (so a run can build outside the stack lock and test under it).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config';
import { LOCAL_ROLE_PASSWORDS, STACK_HOST, STACK_PORTS, stackUrls } from '../../src/config/local-stack';
import { provision } from '../../src/provision';
import { PROJECT_ROOT } from '../../scripts/stack/paths';
import { freshDatabase, randomIdentifier, testKafka, withClient, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(30 * 60_000);

const DOCKER_ENV = { ...process.env, DOCKER_BUILDKIT: '0', DOCKER_CLI_HINTS: 'false' };

function docker(args: readonly string[], options: { allowFailure?: boolean; timeoutMs?: number } = {}): { status: number; stdout: string; stderr: string } {
  const result = spawnSync('docker', args as string[], { env: DOCKER_ENV, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 20 * 60_000 });
  const out = { status: result.status ?? 1, stdout: String(result.stdout ?? '').trim(), stderr: String(result.stderr ?? result.error?.message ?? '').trim() };
  if (out.status !== 0 && !options.allowFailure) throw new Error(`docker ${args.slice(0, 3).join(' ')} … exited with ${out.status}:\n${(out.stderr || out.stdout).split('\n').slice(-20).join('\n')}`);
  return out;
}

/** Why the tests below cannot run here, or undefined when a Docker engine answers. */
function engineMissing(): string | undefined {
  const probe = spawnSync('docker', ['version', '--format', '{{.Server.Version}}'], { env: DOCKER_ENV, encoding: 'utf8', timeout: 20_000 });
  if (probe.status === 0) return undefined;
  const why = probe.error ? `the docker CLI is not installed (${probe.error.message})` : String(probe.stderr).trim().split('\n')[0];
  return `no Docker engine is reachable at ${process.env.DOCKER_HOST ?? 'the default socket'}: ${why}`;
}

const missing = engineMissing();
if (missing) {
  // A skip that says so, in the run's output: never a silent pass.
  process.stderr.write(
    `\ncontainer-image.test.ts: SKIPPED: ${missing}\n  It runs under a private engine: node build/scripts/docker/main.js -- npx jest --selectProjects integration test/integration/container-image.test.ts\n\n`,
  );
}

// ---- the manifests, as data --------------------------------------------------------------------------------

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef: { name: string; key: string } };
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface ManifestContainer {
  args: string[];
  env?: EnvVar[];
  ports: Array<{ name: string; containerPort: number }>;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  securityContext: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}
interface PodSpec {
  terminationGracePeriodSeconds: number;
  securityContext: { runAsNonRoot?: boolean; runAsUser: number; runAsGroup: number };
  containers: ManifestContainer[];
}

const manifests = ['router-deployment.yaml', 'watchdog-deployment.yaml', 'configmap.yaml'].flatMap((file) =>
  parseAllDocuments(readFileSync(join(PROJECT_ROOT, 'deploy/kubernetes', file), 'utf8')).map((d) => d.toJS() as { kind: string; metadata: { name: string }; spec: { template: { spec: PodSpec } }; data: Record<string, string> }),
);
const podOf = (name: string): PodSpec => {
  const deployment = manifests.find((m) => m.kind === 'Deployment' && m.metadata.name === name);
  if (!deployment) throw new Error(`deploy/kubernetes has no Deployment ${name}`);
  return deployment.spec.template.spec;
};
const configMap = manifests.find((m) => m.kind === 'ConfigMap') as { data: Record<string, string> };

/** The Secret the manifests read (secret.example.yaml's keys), with the local stack's role passwords. */
const SECRET: Record<string, string> = { 'router-password': LOCAL_ROLE_PASSWORDS.router, 'monitor-password': LOCAL_ROLE_PASSWORDS.monitor };

/** Ports of this issue's range: with --network host the containers' listeners are the host's. */
const PORTS = { router: 56080, watchdog: 56081, relay: 56082 } as const;
type Service = keyof typeof PORTS;

// ---- the tests ---------------------------------------------------------------------------------------------

(missing ? describe.skip : describe)('the container image, built and run', () => {
  const suffix = randomIdentifier('img').slice(-8).replace(/_/g, '');
  const aggregateType = `img${suffix}`;
  const built = !process.env.OUTBOX_TEST_IMAGE;
  const image = process.env.OUTBOX_TEST_IMAGE ?? `outbox-router:test-${suffix}`;
  const handlersImage = `outbox-router-handlers:test-${suffix}`;
  const dir = mkdtempSync(join(tmpdir(), 'outbox-image-'));
  const started: string[] = [];
  let db: FreshDatabase;
  const until = waitsUpTo(120_000);

  beforeAll(async () => {
    if (built) {
      const t = Date.now();
      docker(['build', '--network', 'host', '-t', image, PROJECT_ROOT]);
      process.stderr.write(`container-image: built ${image} in ${((Date.now() - t) / 1000).toFixed(0)} s\n`);
    }
    // The handlers image, as the manifests and docs/deploy.md say to make it: FROM the image, COPY the module.
    const context = join(dir, 'handlers-image');
    spawnSync('mkdir', ['-p', context]);
    writeFileSync(join(context, 'Dockerfile'), `FROM ${image}\nCOPY handlers.js /app/handlers/handlers.js\n`);
    writeFileSync(
      join(context, 'handlers.js'),
      // Slow on purpose (20 ms an event), so that a SIGTERM finds events in flight. n counts applications.
      `module.exports = { ${aggregateType}: { Placed: async (event, { tx }) => {
  await new Promise((resolve) => setTimeout(resolve, 20));
  await tx.query('INSERT INTO image_effects (event_id, n) VALUES ($1, 1) ON CONFLICT (event_id) DO UPDATE SET n = image_effects.n + 1', [event.id]);
} } };\n`,
    );
    docker(['build', '--network', 'none', '-t', handlersImage, context]);
    // The ConfigMap's settings file, unchanged, where the manifests mount it.
    writeFileSync(join(dir, 'outbox.yaml'), configMap.data['outbox.yaml'] as string);

    db = await freshDatabase('i28image');
    // The manifests' role names (PGUSER=outbox_router, watchdog.user=outbox_monitor) and the relay's.
    await provision(loadConfig({ env: {}, overrides: { database: { database: db.name } } }));
    const admin = testKafka().admin();
    await admin.connect();
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: `outbox.event.${aggregateType}`, numPartitions: 2 }] }).finally(() => admin.disconnect());
    await withClient(db.name, (c) => c.query('CREATE TABLE image_effects (event_id uuid PRIMARY KEY, n int NOT NULL); GRANT SELECT, INSERT, UPDATE ON image_effects TO outbox_router'));
  });

  afterAll(async () => {
    for (const name of started) docker(['rm', '-f', name], { allowFailure: true });
    docker(['rmi', '-f', handlersImage, ...(built ? [image] : [])], { allowFailure: true });
    rmSync(dir, { recursive: true, force: true });
    await db?.drop();
    const admin = testKafka().admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [`outbox.event.${aggregateType}`, `outbox.dlq.${aggregateType}`] }).catch(() => {});
    await admin.disconnect();
  });

  /** This machine's addresses and this test's names, by environment: the settings file stays the ConfigMap's. */
  function overrides(service: Service): string[] {
    const env: Record<string, string> = {
      PGHOST: STACK_HOST,
      PGPORT: String(STACK_PORTS.postgres),
      PGDATABASE: db.name,
      OUTBOX_DB_SSL: 'false',
      KAFKA_BROKERS: stackUrls.kafkaBrokers.join(','),
      OUTBOX_REGISTRY_URL: stackUrls.registry,
      OUTBOX_CONNECT_URL: stackUrls.connect,
      // Not the stack's own connector and slot: the watchdog only looks at this test's.
      OUTBOX_CONNECTOR_NAME: `outbox-${aggregateType}`,
      OUTBOX_SLOT_NAME: `${aggregateType}_slot`,
      OUTBOX_ROUTER_CONSUMER: aggregateType,
      OUTBOX_ROUTER_TOPICS: `^outbox\\.event\\.${aggregateType}$`,
      // One broker here; the ConfigMap asks for 3.
      OUTBOX_ROUTER_DLQ_REPLICATION_FACTOR: '1',
      OUTBOX_WATCHDOG_CLUSTER: aggregateType,
      [`OUTBOX_${service.toUpperCase()}_METRICS_PORT`]: String(PORTS[service]),
    };
    return Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  }

  /** `docker run` flags for a manifest's pod: its security context, its mounts, its args, its env (Secret values filled in). */
  function runFlags(pod: PodSpec, container: ManifestContainer): string[] {
    const flags = ['--network', 'host', '--user', `${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`];
    if (container.securityContext.readOnlyRootFilesystem) flags.push('--read-only');
    for (const cap of container.securityContext.capabilities?.drop ?? []) flags.push('--cap-drop', cap);
    if (container.securityContext.allowPrivilegeEscalation === false) flags.push('--security-opt', 'no-new-privileges');
    for (const mount of container.volumeMounts) flags.push('-v', `${dir}/outbox.yaml:${mount.mountPath}/outbox.yaml${mount.readOnly ? ':ro' : ''}`);
    for (const e of container.env ?? []) flags.push('-e', `${e.name}=${e.value ?? SECRET[e.valueFrom?.secretKeyRef.key ?? ''] ?? ''}`);
    return flags;
  }

  const router = podOf('outbox-router');
  const watchdog = podOf('outbox-watchdog');
  /** The relay has no manifest: docs/deploy.md says to run it like the router (its args, PGUSER=outbox_relay, port 9466). */
  const relayContainer: ManifestContainer = {
    ...(router.containers[0] as ManifestContainer),
    args: ['relay', '--config', '/etc/outbox/outbox.yaml'],
    env: [{ name: 'PGUSER', value: 'outbox_relay' }, { name: 'PGPASSWORD', value: LOCAL_ROLE_PASSWORDS.relay }],
  };
  const SPECS: Record<Service, { pod: PodSpec; container: ManifestContainer; image: () => string }> = {
    router: { pod: router, container: router.containers[0] as ManifestContainer, image: () => handlersImage },
    watchdog: { pod: watchdog, container: watchdog.containers[0] as ManifestContainer, image: () => image },
    relay: { pod: router, container: relayContainer, image: () => image },
  };

  let runs = 0;
  function start(service: Service): string {
    const { pod, container, image: imageOf } = SPECS[service];
    const name = `${aggregateType}-${service}-${++runs}`;
    docker(['run', '-d', '--name', name, ...runFlags(pod, container), ...overrides(service), imageOf(), ...container.args]);
    started.push(name);
    return name;
  }
  const logsOf = (name: string, tail = 30) => {
    const logs = docker(['logs', '--tail', String(tail), name], { allowFailure: true });
    return `${logs.stdout}\n${logs.stderr}`.trim();
  };
  /** The container's log lines (JSON: no terminal) at level error or above. */
  const errorsIn = (name: string) => logsOf(name, 10_000).split('\n').filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
  const status = (service: Service, path: string) => fetch(`http://${STACK_HOST}:${PORTS[service]}${path}`).then((r) => r.status, () => 0);
  async function ready(service: Service, name: string): Promise<void> {
    const path = SPECS[service].container.readinessProbe?.httpGet.path ?? '/readyz';
    await until(`${name} ready on ${path}`, async () => {
      const running = docker(['inspect', '--format', '{{.State.Running}}', name]).stdout === 'true';
      if (!running) throw new Error(`${name} exited:\n${logsOf(name)}`);
      return (await status(service, path)) === 200;
    });
  }
  /** SIGTERM (docker stop) with the pod's grace period; the exit code and how long it took. */
  function terminate(service: Service, name: string): { code: number; seconds: number } {
    const t = Date.now();
    docker(['stop', '--time', String(SPECS[service].pod.terminationGracePeriodSeconds), name]);
    const code = Number(docker(['inspect', '--format', '{{.State.ExitCode}}', name]).stdout);
    return { code, seconds: (Date.now() - t) / 1000 };
  }
  const effects = () => withClient(db.name, async (c) => (await c.query<{ events: string; applied: string; twice: string }>('SELECT count(*) AS events, coalesce(sum(n), 0) AS applied, count(*) FILTER (WHERE n > 1) AS twice FROM image_effects')).rows[0] as { events: string; applied: string; twice: string });
  async function write(count: number): Promise<void> {
    // Plain SQL with the contract's columns only: a valid event (docs/DESIGN: the outbox table).
    await withClient(db.name, (c) =>
      c.query(
        `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type)
         SELECT gen_random_uuid(), $1, 'order-' || (g % 25), 'Placed', convert_to(json_build_object('n', g)::text, 'UTF8'), 'application/json' FROM generate_series(1, $2) g`,
        [aggregateType, count],
      ),
    );
  }

  it('is built FROM the Node 24 LTS base and runs as uid 1000 (a number, as runAsNonRoot needs)', () => {
    const [user, size] = docker(['image', 'inspect', '--format', '{{.Config.User}} {{.Size}}', image]).stdout.split(' ');
    expect(user).toBe(`${router.securityContext.runAsUser}:${router.securityContext.runAsGroup}`);
    expect(router.securityContext.runAsNonRoot).toBe(true);
    const node = docker(['run', '--rm', '--network', 'none', '--entrypoint', 'node', image, '-p', 'process.version + " " + process.getuid()']).stdout;
    expect(node).toMatch(/^v24\.\d+\.\d+ 1000$/);
    const help = docker(['run', '--rm', '--network', 'none', '--read-only', image]).stdout;
    expect(help).toContain('Usage: outbox');
    process.stderr.write(`container-image: ${image}: user ${user}, ${node}, ${Math.round(Number(size) / 1e6)} MB\n`);
  });

  it('runs router, watchdog and relay as the manifests declare; probes, /metrics, uid and a read-only root from outside; SIGTERM exits 0 and nothing in flight is lost', async () => {
    const names = { relay: start('relay'), router: start('router'), watchdog: start('watchdog') };
    for (const service of Object.keys(names) as Service[]) await ready(service, names[service]);

    // The probes each manifest declares, on the port its ConfigMap gives (here moved into this test's range).
    for (const service of ['router', 'watchdog'] as const) {
      const { container } = SPECS[service];
      for (const probe of [container.livenessProbe, container.readinessProbe, container.startupProbe]) {
        if (!probe) continue;
        expect(container.ports.find((p) => p.name === probe.httpGet.port)?.containerPort).toBe(STACK_PORTS[`${service}Metrics`]);
        expect([service, probe.httpGet.path, await status(service, probe.httpGet.path)]).toEqual([service, probe.httpGet.path, 200]);
      }
    }
    expect(await status('relay', '/livez')).toBe(200);
    for (const [service, metric] of [['router', 'outbox_router_records_total'], ['watchdog', 'outbox_watchdog_last_success_timestamp_seconds'], ['relay', 'outbox_relay_published_total']] as const) {
      const text = await fetch(`http://${STACK_HOST}:${PORTS[service]}/metrics`).then((r) => r.text());
      expect([service, text.includes(`# TYPE ${metric}`)]).toEqual([service, true]);
    }

    for (const service of Object.keys(names) as Service[]) {
      const name = names[service];
      // The process itself, seen from the host: uid and gid 1000, no capabilities, no new privileges.
      const pid = docker(['inspect', '--format', '{{.State.Pid}}', name]).stdout;
      const procStatus = readFileSync(`/proc/${pid}/status`, 'utf8');
      expect([name, /^Uid:\s+(\d+)/m.exec(procStatus)?.[1], /^Gid:\s+(\d+)/m.exec(procStatus)?.[1]]).toEqual([name, '1000', '1000']);
      expect([name, /^CapEff:\s+(\w+)/m.exec(procStatus)?.[1]]).toEqual([name, '0000000000000000']);
      expect([name, /^NoNewPrivs:\s+(\d)/m.exec(procStatus)?.[1]]).toEqual([name, '1']);
      // The root file system refuses writes (everywhere: /app, /tmp, the home folder), and the service runs anyway.
      expect(docker(['inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', name]).stdout).toBe('true');
      const write = docker(['exec', name, 'node', '-e', "for (const f of ['/app/x', '/tmp/x', '/home/node/x']) { try { require('fs').writeFileSync(f, 'x'); console.log('wrote ' + f); } catch (e) { console.log(e.code); } }"]);
      expect([name, write.stdout.split('\n')]).toEqual([name, ['EROFS', 'EROFS', 'EROFS']]);
    }

    // 400 events through relay → Kafka → router. The router is stopped (SIGTERM) while it works through them.
    await write(400);
    await until('the router has applied some events', async () => Number((await effects()).events) >= 40);
    const atSigterm = await effects();
    const routerStop = terminate('router', names.router);
    const atExit = await effects();
    expect([routerStop, errorsIn(names.router)]).toEqual([expect.objectContaining({ code: 0 }), []]);
    // Events were in flight at SIGTERM: written and published, not yet applied. None was applied twice.
    expect(Number(atSigterm.events)).toBeLessThan(400);
    expect(atExit.twice).toBe('0');

    // The relay is stopped too; 100 more events wait in the outbox while it is down.
    const relayStop = terminate('relay', names.relay);
    expect(relayStop.code).toBe(0);
    await write(100);
    const watchdogStop = terminate('watchdog', names.watchdog);
    expect(watchdogStop.code).toBe(0);

    // Restarted: every event is applied, each exactly once.
    const again = { relay: start('relay'), router: start('router') };
    await ready('relay', again.relay);
    await ready('router', again.router);
    await until('all 500 events applied', async () => Number((await effects()).events) === 500);
    expect(await effects()).toEqual({ events: '500', applied: '500', twice: '0' });
    const outbox = await withClient(db.name, async (c) => (await c.query<{ n: string }>('SELECT count(*) AS n FROM outbox WHERE aggregate_type = $1', [aggregateType])).rows[0]?.n);
    process.stderr.write(
      `container-image: SIGTERM router ${JSON.stringify(routerStop)} with ${400 - Number(atSigterm.events)} of 400 events in flight (${atSigterm.events} applied; ${atExit.events} at its exit); ` +
        `relay ${JSON.stringify(relayStop)}; watchdog ${JSON.stringify(watchdogStop)}; after restart 500 applied once each (outbox rows: ${outbox})\n`,
    );
    for (const service of ['relay', 'router'] as const) expect(terminate(service, again[service]).code).toBe(0);
  });
});
