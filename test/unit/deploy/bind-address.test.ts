/**
 * Every service's health and metrics listener address is a setting with a flag and an environment
 * variable, defaulting to loopback: containers and pods set 0.0.0.0 (Dockerfile, docker-compose.yml,
 * deploy/kubernetes/), a host install keeps its listeners private.
 */
import { RELAY_FLAGS } from '../../../src/cli/relay-command';
import { ROUTER_FLAGS } from '../../../src/cli/router-command';
import { WATCHDOG_FLAGS } from '../../../src/cli/watchdog-command';
import { loadConfig, outboxConfigSchema } from '../../../src/config';
import { STACK_HOST } from '../../../src/config/local-stack';
import { envFor, SERVICES } from './files';

const FLAGS = { router: ROUTER_FLAGS, watchdog: WATCHDOG_FLAGS, relay: RELAY_FLAGS };

describe.each(SERVICES)('%s: the health listener address', (service) => {
  it(`defaults to ${STACK_HOST}`, () => {
    expect(outboxConfigSchema.parse({})[service].metricsHost).toBe(STACK_HOST);
  });

  it('is set by --metrics-host and by its environment variable', () => {
    expect(FLAGS[service].filter((f) => f.path === `${service}.metricsHost`).map((f) => f.flag)).toEqual(['--metrics-host']);
    const name = envFor([service, 'metricsHost']);
    expect(name).toBe(`OUTBOX_${service.toUpperCase()}_METRICS_HOST`);
    expect(loadConfig({ env: { [name]: '0.0.0.0' } })[service].metricsHost).toBe('0.0.0.0');
  });
});
