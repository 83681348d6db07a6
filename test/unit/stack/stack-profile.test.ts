/** scripts/stack/stack-profile.ts and the profile's services in scripts/stack/stack.ts (no process is started). */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stackPaths } from '../../../scripts/stack/paths';
import { createStack, serviceNames, SERVICE_NAMES } from '../../../scripts/stack/stack';
import { effectiveProfile, recordedProfile, recordProfile } from '../../../scripts/stack/stack-profile';
import { thrown } from '../../support/expect-error';

let dir: string;
const savedProfile = process.env.OUTBOX_STACK_PROFILE;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'outbox-profile-'));
  delete process.env.OUTBOX_STACK_PROFILE;
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  if (savedProfile === undefined) delete process.env.OUTBOX_STACK_PROFILE;
  else process.env.OUTBOX_STACK_PROFILE = savedProfile;
});

const at = () => stackPaths(join(dir, 'state'), join(dir, 'cache'));

describe('the recorded profile', () => {
  it('is absent for a stack never started, then what `up` recorded', () => {
    const paths = at();
    expect(recordedProfile(paths)).toBeUndefined();
    recordProfile(paths, 'cluster');
    expect(recordedProfile(paths)).toBe('cluster');
  });

  it('ignores a file that names no profile', () => {
    const paths = at();
    recordProfile(paths, 'single');
    writeFileSync(paths.profileFile, 'ha\n');
    expect(recordedProfile(paths)).toBeUndefined();
  });

  it('sticks: asked for wins, else the recorded one, else single', () => {
    const paths = at();
    expect(effectiveProfile({}, paths)).toBe('single');
    recordProfile(paths, 'cluster');
    expect(effectiveProfile({}, paths)).toBe('cluster');
    expect(effectiveProfile({ profile: 'single' }, paths)).toBe('single');
  });

  it('createStack acts on the recorded profile without being told, and on OUTBOX_STACK_PROFILE when set', () => {
    const stateDir = join(dir, 'state');
    recordProfile(stackPaths(stateDir, dir), 'cluster');
    expect(createStack({ stateDir }).profile).toBe('cluster');
    process.env.OUTBOX_STACK_PROFILE = 'single';
    expect(createStack({ stateDir }).profile).toBe('single');
  });
});

describe('service names', () => {
  it('keep the single profile\'s four, and name every node of the cluster', () => {
    expect(serviceNames('single')).toEqual([...SERVICE_NAMES]);
    expect(serviceNames('cluster')).toEqual(['postgres', 'postgres-a', 'postgres-b', 'kafka-1', 'kafka-2', 'kafka-3', 'registry', 'connect-1', 'connect-2']);
  });

  it('on the cluster profile, kafka and connect stand for all brokers and all workers; a node for itself', () => {
    const stack = createStack({ stateDir: join(dir, 'state'), profile: 'cluster' });
    expect(stack.resolveServices('kafka')).toEqual(['kafka-1', 'kafka-2', 'kafka-3']);
    expect(stack.resolveServices('connect')).toEqual(['connect-1', 'connect-2']);
    expect(stack.resolveServices('kafka-2')).toEqual(['kafka-2']);
    expect(stack.resolveServices('postgres')).toEqual(['postgres']);
    expect(stack.resolveServices('postgres-b')).toEqual(['postgres-b']);
  });

  it('a cluster node on the single profile is STACK_PROFILE_MISMATCH, naming the profile and its services', () => {
    const stack = createStack({ stateDir: join(dir, 'state'), profile: 'single' });
    expect(stack.resolveServices('kafka')).toEqual(['kafka']);
    const error = thrown(() => stack.resolveServices('kafka-2'));
    expect(error.code).toBe('STACK_PROFILE_MISMATCH');
    expect(error.message).toContain('single profile');
    expect(error.message).toContain('postgres, kafka, registry, connect');
  });
});
