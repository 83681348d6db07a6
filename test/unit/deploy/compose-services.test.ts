/**
 * docker-compose.yml's `services` and `relay` profiles: the outbox services from ./Dockerfile beside the
 * stack. Parsed only (no Docker engine here); each service's environment goes through the real
 * loadConfig, so a misspelled variable or a wrong address fails here rather than in a container.
 */
import { loadConfig, outboxConfigSchema, type OutboxConfig } from '../../../src/config';
import { LOCAL_ROLE_PASSWORDS, REGISTRY_CCOMPAT_PATH, STACK_HOST, STACK_PORTS } from '../../../src/config/local-stack';
import { HEALTH_PATHS } from '../../../src/service';
import { envFor, KNOWN_ENV, parseYaml, read, SERVICES, type ServiceName } from './files';

interface ComposeService {
  image?: string;
  build?: string | { context: string };
  profiles?: string[];
  command?: string[];
  environment?: Record<string, unknown>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}

const compose = parseYaml(read('docker-compose.yml')) as { services: Record<string, ComposeService> };
const service = (name: string): ComposeService => {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no service "${name}"`);
  return s;
};
const env = (name: string): Record<string, string> => Object.fromEntries(Object.entries(service(name).environment ?? {}).map(([k, v]) => [k, String(v)]));
const config = (name: string): OutboxConfig => loadConfig({ env: env(name) });
const defaults = outboxConfigSchema.parse({});

/** `host:container` or `ip:host:container` → the container side. */
const containerPort = (mapping: string | undefined): number => Number(mapping?.split(':').pop());

const PORT_OF: Record<ServiceName, number> = { router: STACK_PORTS.routerMetrics, watchdog: STACK_PORTS.watchdogMetrics, relay: STACK_PORTS.relayMetrics };
const PROFILE_OF: Record<ServiceName, string> = { router: 'services', watchdog: 'services', relay: 'relay' };

describe('docker-compose.yml: the outbox services', () => {
  const outboxServices = ['provision', ...SERVICES];

  it('run the image of ./Dockerfile, only under their profiles (plain `docker compose up` is the stack alone)', () => {
    for (const name of outboxServices) {
      const s = service(name);
      expect([name, s.build]).toEqual([name, '.']);
      expect([name, s.image]).toEqual([name, service('router').image]);
      expect(s.profiles?.length).toBeGreaterThan(0);
    }
    for (const name of SERVICES) expect([name, service(name).profiles]).toEqual([name, [PROFILE_OF[name]]]);
    expect(service('provision').profiles?.sort()).toEqual(['relay', 'services']);
    for (const name of ['postgres', 'kafka', 'connect', 'registry']) expect(service(name).profiles).toBeUndefined();
  });

  it('run the CLI command of their name; the services wait for db:provision to finish', () => {
    expect(service('provision').command).toEqual(['db:provision']);
    for (const name of SERVICES) {
      expect(service(name).command).toEqual([name]);
      expect(service(name).depends_on?.provision).toEqual({ condition: 'service_completed_successfully' });
    }
  });

  it('set only environment variables the configuration reads', () => {
    for (const name of outboxServices) {
      for (const key of Object.keys(env(name))) expect([name, key, KNOWN_ENV.has(key)]).toEqual([name, key, true]);
    }
  });

  it.each(SERVICES)('%s: health listener on 0.0.0.0 at its default port, published on 127.0.0.1, probed on /readyz', (name) => {
    const resolved = config(name)[name];
    expect(resolved.metricsHost).toBe('0.0.0.0');
    expect(resolved.metricsPort).toBe(PORT_OF[name]);
    expect(resolved.metricsPort).toBe(defaults[name].metricsPort);
    expect(env(name)[envFor([name, 'metricsHost'])]).toBe('0.0.0.0');
    expect(service(name).ports).toEqual([`${STACK_HOST}:${PORT_OF[name]}:${resolved.metricsPort}`]);
    expect(service(name).healthcheck?.test.join(' ')).toContain(`http://127.0.0.1:${resolved.metricsPort}${HEALTH_PATHS.ready}`);
  });

  it.each(outboxServices)('%s: reaches the stack at its addresses inside the compose network', (name) => {
    const c = config(name);
    expect(c.database.host).toBe('postgres');
    expect(c.database.port).toBe(containerPort(service('postgres').ports?.[0]));
    expect(c.database.database).toBe(env('postgres')['POSTGRES_DB']);
    // The brokers are the listener Kafka advertises to containers.
    const advertised = String(service('kafka').environment?.['KAFKA_ADVERTISED_LISTENERS']).split(',');
    for (const broker of c.kafka.brokers) expect(advertised).toContain(`PLAINTEXT://${broker}`);
    expect(c.registry.url).toBe(`http://registry:${containerPort(service('registry').ports?.[0])}${REGISTRY_CCOMPAT_PATH}`);
    expect(c.connect.url).toBe(`http://connect:${containerPort(service('connect').ports?.[0])}`);
  });

  it('db:provision runs as the superuser and sets the local role passwords the services and Connect use', () => {
    const c = config('provision');
    expect([c.database.user, c.database.password]).toEqual([env('postgres')['POSTGRES_USER'], env('postgres')['POSTGRES_PASSWORD']]);
    expect({ cdc: c.roles.cdcPassword, app: c.roles.appPassword, monitor: c.roles.monitorPassword, router: c.roles.routerPassword, relay: c.roles.relayPassword }).toEqual({ ...LOCAL_ROLE_PASSWORDS });
    expect(c.roles.cdcPassword).toBe(env('connect')['OUTBOX_CDC_PASSWORD']);
  });

  it('each service connects as its own least-privilege role', () => {
    expect([config('router').database.user, config('router').database.password]).toEqual([defaults.roles.router, LOCAL_ROLE_PASSWORDS.router]);
    expect([config('relay').database.user, config('relay').database.password]).toEqual([defaults.roles.relay, LOCAL_ROLE_PASSWORDS.relay]);
    expect([config('watchdog').watchdog.user, config('watchdog').watchdog.password]).toEqual([defaults.roles.monitor, LOCAL_ROLE_PASSWORDS.monitor]);
  });

  it('the router names its consumer and loads its handlers from the mounted folder', () => {
    const router = config('router').router;
    expect(router.consumer).toBeTruthy();
    const mounts = (service('router').volumes ?? []).map((v) => v.split(':'));
    expect(mounts.some(([source, target]) => source === './build/examples' && router.handlers?.startsWith(`${target}/`))).toBe(true);
  });
});
