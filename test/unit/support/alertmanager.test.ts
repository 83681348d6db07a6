/**
 * test/support/alertmanager.ts ensureAlertmanager and scripts/stack/apt-install.ts: when `npm test` installs
 * Alertmanager itself. The machine is never touched: the runner, `which`, root check and file check are fakes.
 */
import { aptInstall } from '../../../scripts/stack/apt-install';
import { DEBIAN_ALERTMANAGER_BIN, ensureAlertmanager } from '../../support/alertmanager';

interface Call {
  command: string;
  args: readonly string[];
  frontend: string | undefined;
}

function fakeMachine(options: { root: boolean; apt: boolean; installs?: boolean; status?: number }) {
  let installed = false;
  const calls: Call[] = [];
  return {
    calls,
    deps: {
      isRoot: () => options.root,
      which: (command: string) => (options.apt && command === 'apt-get' ? '/usr/bin/apt-get' : undefined),
      run: (command: string, args: readonly string[], { env }: { env: NodeJS.ProcessEnv }) => {
        calls.push({ command, args, frontend: env.DEBIAN_FRONTEND });
        if (args[0] === 'install' && (options.installs ?? true)) installed = true;
        return { status: options.status ?? 0, output: options.status ? 'E: Unable to locate package prometheus-alertmanager' : '' };
      },
      exists: (path: string) => installed && path === DEBIAN_ALERTMANAGER_BIN,
    },
  };
}

describe('ensureAlertmanager', () => {
  it('installs nothing when the binary is there', () => {
    const machine = fakeMachine({ root: true, apt: true });
    expect(ensureAlertmanager(DEBIAN_ALERTMANAGER_BIN, { ...machine.deps, exists: () => true })).toBe(DEBIAN_ALERTMANAGER_BIN);
    expect(machine.calls).toEqual([]);
  });

  it('as root with apt-get, runs apt-get update then install -y prometheus-alertmanager, non-interactively', () => {
    const machine = fakeMachine({ root: true, apt: true });
    expect(ensureAlertmanager(DEBIAN_ALERTMANAGER_BIN, machine.deps)).toBe(DEBIAN_ALERTMANAGER_BIN);
    expect(machine.calls).toEqual([
      { command: 'apt-get', args: ['update', '-q'], frontend: 'noninteractive' },
      { command: 'apt-get', args: ['install', '-y', '-q', 'prometheus-alertmanager'], frontend: 'noninteractive' },
    ]);
  });

  it('not as root: runs nothing and says so, with the command to run', () => {
    const machine = fakeMachine({ root: false, apt: true });
    expect(() => ensureAlertmanager(DEBIAN_ALERTMANAGER_BIN, machine.deps)).toThrow(
      /not found at \/usr\/bin\/prometheus-alertmanager and the tests do not run as root.*apt-get update && apt-get install -y prometheus-alertmanager.*ALERTMANAGER_BIN/,
    );
    expect(machine.calls).toEqual([]);
  });

  it('without apt-get: runs nothing and says so', () => {
    const machine = fakeMachine({ root: true, apt: false });
    expect(() => ensureAlertmanager(DEBIAN_ALERTMANAGER_BIN, machine.deps)).toThrow(/has no apt-get/);
    expect(machine.calls).toEqual([]);
  });

  it("quotes apt-get's output when the install fails", () => {
    const machine = fakeMachine({ root: true, apt: true, status: 100 });
    expect(() => ensureAlertmanager(DEBIAN_ALERTMANAGER_BIN, machine.deps)).toThrow(/apt-get failed:\nE: Unable to locate package prometheus-alertmanager/);
    // A failed update stops before the install.
    expect(machine.calls.map((c) => c.args[0])).toEqual(['update']);
  });

  it('never installs over a binary named by ALERTMANAGER_BIN', () => {
    const machine = fakeMachine({ root: true, apt: true });
    expect(() => ensureAlertmanager('/opt/am/alertmanager', machine.deps)).toThrow(/not found at \/opt\/am\/alertmanager \(ALERTMANAGER_BIN\)/);
    expect(machine.calls).toEqual([]);
  });
});

describe('aptInstall', () => {
  it('installs every package named, in one apt-get install', () => {
    const machine = fakeMachine({ root: true, apt: true });
    expect(aptInstall(['postgresql', 'postgresql-contrib'], machine.deps)).toEqual({ ok: true });
    expect(machine.calls[1]?.args).toEqual(['install', '-y', '-q', 'postgresql', 'postgresql-contrib']);
  });

  it('reports not-root and no-apt without running anything', () => {
    expect(aptInstall(['x'], fakeMachine({ root: false, apt: true }).deps)).toEqual({ ok: false, reason: 'not-root', output: '' });
    expect(aptInstall(['x'], fakeMachine({ root: true, apt: false }).deps)).toEqual({ ok: false, reason: 'no-apt', output: '' });
  });
});
