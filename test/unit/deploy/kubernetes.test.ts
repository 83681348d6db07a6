/**
 * deploy/kubernetes/: example manifests, never applied here (no cluster). Checked against the code: the
 * ConfigMap's settings file and each container's environment go through the real loadConfig, and the
 * ports, probe paths and scrape annotations must agree with what that configuration makes the service serve.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, outboxConfigSchema, type OutboxConfig } from '../../../src/config';
import { HEALTH_PATHS } from '../../../src/service';
import { dockerfileInstructions, KNOWN_ENV, read, yamlDocuments } from './files';

const DIR = 'deploy/kubernetes';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  args: string[];
  env?: EnvVar[];
  ports: Array<{ name?: string; containerPort: number }>;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  resources: { requests: Record<string, string>; limits?: Record<string, string> };
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface Deployment {
  kind: 'Deployment';
  metadata: { name: string };
  spec: {
    replicas: number;
    strategy?: { type: string };
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
      spec: { securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; containers: Container[]; volumes?: Array<{ name: string; configMap?: { name: string } }> };
    };
  };
}

const docs = yamlDocuments(DIR);
const ofKind = <T>(kind: string) => docs.filter((d) => d.doc['kind'] === kind).map((d) => d.doc as unknown as T);
const deployments = ofKind<Deployment>('Deployment');
const deployment = (command: 'router' | 'watchdog'): Deployment => {
  const found = deployments.find((d) => d.spec.template.spec.containers[0]?.args[0] === command);
  if (!found) throw new Error(`no Deployment runs \`outbox ${command}\``);
  return found;
};
const configMaps = ofKind<{ metadata: { name: string }; data: Record<string, string> }>('ConfigMap');
const secrets = ofKind<{ metadata: { name: string }; stringData: Record<string, string> }>('Secret');

/** Memory quantities as bytes: `256Mi`, `200M`. */
function bytes(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (!m) throw new Error(`not a memory quantity: ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}

let tmp: string;
beforeAll(() => (tmp = mkdtempSync(join(tmpdir(), 'outbox-k8s-'))));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * What the container's process resolves: the `--config` file (the ConfigMap key behind the mounted
 * path) and its environment, secrets as placeholders.
 */
function resolvedConfig(d: Deployment): OutboxConfig {
  const pod = d.spec.template.spec;
  const container = pod.containers[0] as Container;
  const configPath = container.args[container.args.indexOf('--config') + 1] as string;
  const mount = container.volumeMounts?.find((m) => configPath.startsWith(`${m.mountPath}/`));
  if (!mount) throw new Error(`${d.metadata.name}: --config ${configPath} is not in a mounted volume`);
  const configMapName = pod.volumes?.find((v) => v.name === mount.name)?.configMap?.name;
  const data = configMaps.find((c) => c.metadata.name === configMapName)?.data[configPath.slice(mount.mountPath.length + 1)];
  if (data === undefined) throw new Error(`${d.metadata.name}: ${configPath} is no key of ConfigMap ${configMapName}`);
  const file = join(tmp, `${d.metadata.name}.yaml`);
  writeFileSync(file, data);
  const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? 'from-the-secret']));
  return loadConfig({ file, env });
}

describe('deploy/kubernetes', () => {
  it('the kustomization lists every manifest but the example Secret (created from your secret store)', () => {
    const kustomization = docs.find((d) => d.doc['kind'] === 'Kustomization')?.doc as { resources: string[] };
    const files = [...new Set(docs.map((d) => d.file))].filter((f) => f !== 'kustomization.yaml' && f !== 'secret.example.yaml');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
  });

  it('the ConfigMap holds a settings file the schema accepts, with no secrets in it', () => {
    expect(configMaps).toHaveLength(1);
    for (const [key, data] of Object.entries(configMaps[0]?.data ?? {})) {
      const file = join(tmp, key);
      writeFileSync(file, data);
      expect(() => loadConfig({ file, env: {} })).not.toThrow();
      expect(data).not.toMatch(/password|secret/i);
    }
  });

  it.each(['router', 'watchdog'] as const)('%s: port, probes and scrape annotations agree with the resolved configuration', (command) => {
    const d = deployment(command);
    const container = d.spec.template.spec.containers[0] as Container;
    const settings = resolvedConfig(d)[command];
    expect(settings.metricsHost).toBe('0.0.0.0');
    const port = container.ports.find((p) => p.containerPort === settings.metricsPort);
    expect(port).toBeDefined();
    expect(settings.metricsPort).toBe(outboxConfigSchema.parse({})[command].metricsPort);
    const probePort = (probe: Probe | undefined) => (typeof probe?.httpGet.port === 'number' ? probe.httpGet.port : container.ports.find((p) => p.name === probe?.httpGet.port)?.containerPort);
    expect(container.livenessProbe?.httpGet.path).toBe(HEALTH_PATHS.live);
    expect(container.readinessProbe?.httpGet.path).toBe(HEALTH_PATHS.ready);
    for (const probe of [container.livenessProbe, container.readinessProbe, container.startupProbe].filter(Boolean)) {
      expect(probePort(probe)).toBe(settings.metricsPort);
      expect(Object.values(HEALTH_PATHS)).toContain(probe?.httpGet.path);
    }
    expect(d.spec.template.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(settings.metricsPort), 'prometheus.io/path': HEALTH_PATHS.metrics });
  });

  it('containers set only variables the configuration reads; passwords come from the Secret', () => {
    for (const d of deployments) {
      for (const e of d.spec.template.spec.containers.flatMap((c) => c.env ?? [])) {
        expect([d.metadata.name, e.name, KNOWN_ENV.has(e.name)]).toEqual([d.metadata.name, e.name, true]);
        if (/PASSWORD|SECRET/.test(e.name)) {
          expect(e.value).toBeUndefined();
          const ref = e.valueFrom?.secretKeyRef;
          expect(secrets.find((s) => s.metadata.name === ref?.name)?.stringData[ref?.key ?? '']).toBeDefined();
        }
      }
    }
  });

  it('the router connects as its own role, the watchdog as the monitoring role', () => {
    const defaults = outboxConfigSchema.parse({});
    expect(resolvedConfig(deployment('router')).database.user).toBe(defaults.roles.router);
    expect(resolvedConfig(deployment('watchdog')).watchdog.user).toBe(defaults.roles.monitor);
  });

  it('the router handlers module lives where the image keeps handlers', () => {
    const handlers = resolvedConfig(deployment('router')).router.handlers;
    expect(read('Dockerfile')).toContain('RUN mkdir /app/handlers');
    expect(handlers).toMatch(/^\/app\/handlers\//);
  });

  it('pods run as the image\'s non-root user', () => {
    const user = dockerfileInstructions(read('Dockerfile')).filter((i) => i.keyword === 'USER').pop()?.args.split(':')[0];
    for (const d of deployments) expect(d.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: Number(user) });
  });

  it('the router\'s memory request covers the RSS target of docs/bench.md', () => {
    const target = /RSS ≤ (\d+) MB/.exec(read('docs/bench.md'))?.[1];
    expect(target).toBeDefined();
    const { requests, limits } = (deployment('router').spec.template.spec.containers[0] as Container).resources;
    expect(bytes(requests['memory'] as string)).toBeGreaterThanOrEqual(Number(target) * 1e6);
    expect(bytes(limits?.['memory'] as string)).toBeGreaterThanOrEqual(bytes(requests['memory'] as string));
  });

  it('the PodDisruptionBudget selects the router pods and keeps one of them', () => {
    const router = deployment('router');
    const pdb = ofKind<{ spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } }>('PodDisruptionBudget')[0];
    expect(pdb?.spec.selector.matchLabels).toEqual(router.spec.selector.matchLabels);
    expect(router.spec.template.metadata.labels).toMatchObject(router.spec.selector.matchLabels);
    expect(pdb?.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(pdb?.spec.minAvailable).toBeLessThan(router.spec.replicas);
  });

  it('one watchdog, replaced rather than rolled (two would alert twice)', () => {
    const watchdog = deployment('watchdog');
    expect(watchdog.spec.replicas).toBe(1);
    expect(watchdog.spec.strategy?.type).toBe('Recreate');
    expect(watchdog.spec.template.metadata.labels).toMatchObject(watchdog.spec.selector.matchLabels);
  });
});
