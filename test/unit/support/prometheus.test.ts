/**
 * test/support/prometheus.ts ensurePrometheus: how `npm test` installs Prometheus on a fresh machine
 * without leaving the packaged service running. The machine is never touched: fakes throughout.
 */
import { DEBIAN_PROMETHEUS_BIN, ensurePrometheus } from '../../support/prometheus';

function fakeMachine(options: { invokeRcD: boolean }) {
  let installed = false;
  const calls: string[] = [];
  return {
    calls,
    deps: {
      isRoot: () => true,
      which: (command: string) => (command === 'apt-get' || (options.invokeRcD && command === 'invoke-rc.d') ? `/usr/sbin/${command}` : undefined),
      run: (command: string, args: readonly string[]) => {
        calls.push([command, ...args].join(' '));
        if (args[0] === 'install') installed = true;
        return { status: 0, output: '' };
      },
      exists: (path: string) => installed && path === DEBIAN_PROMETHEUS_BIN,
    },
  };
}

describe('ensurePrometheus', () => {
  it('installs prometheus without its recommendations, then stops the service the package may have started', () => {
    const machine = fakeMachine({ invokeRcD: true });
    expect(ensurePrometheus(DEBIAN_PROMETHEUS_BIN, machine.deps)).toBe(DEBIAN_PROMETHEUS_BIN);
    expect(machine.calls).toEqual(['apt-get update -q', 'apt-get install -y -q --no-install-recommends prometheus', 'invoke-rc.d prometheus stop']);
  });

  it('without invoke-rc.d (no init scripts) there is nothing to stop', () => {
    const machine = fakeMachine({ invokeRcD: false });
    ensurePrometheus(DEBIAN_PROMETHEUS_BIN, machine.deps);
    expect(machine.calls).toEqual(['apt-get update -q', 'apt-get install -y -q --no-install-recommends prometheus']);
  });

  it('installs nothing when the binary is there, and never over one named by PROMETHEUS_BIN', () => {
    const machine = fakeMachine({ invokeRcD: true });
    expect(ensurePrometheus(DEBIAN_PROMETHEUS_BIN, { ...machine.deps, exists: () => true })).toBe(DEBIAN_PROMETHEUS_BIN);
    expect(() => ensurePrometheus('/opt/prom/prometheus', machine.deps)).toThrow(/Prometheus not found at \/opt\/prom\/prometheus \(PROMETHEUS_BIN\).*apt-get install -y prometheus/);
    expect(machine.calls).toEqual([]);
  });
});
