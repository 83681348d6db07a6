/**
 * src/provision/preflight.ts: preflightProblems is pure over the facts read from the server, so
 * every rule is checked here with hand-made facts (no database).
 */
import { isOutboxError } from '../../../src/errors';
import { assertPreflight, preflightProblems, type PreflightFacts } from '../../../src/provision/preflight';

type FactsPatch = Partial<Omit<PreflightFacts, 'slots' | 'walSenders' | 'role'>> & {
  slots?: Partial<PreflightFacts['slots']>;
  walSenders?: Partial<PreflightFacts['walSenders']>;
  role?: Partial<PreflightFacts['role']>;
};

function facts(patch: FactsPatch = {}): PreflightFacts {
  const base: PreflightFacts = {
    database: 'app',
    version: '16.4',
    versionNum: 160004,
    walLevel: 'logical',
    slots: { max: 10, used: 2, ours: false },
    walSenders: { max: 10, used: 1 },
    role: { name: 'postgres', superuser: true, createRole: true, replication: true, canCreateInDatabase: true, canGrantRdsReplication: false, cloudSqlSuperuser: false, canGrantPgMonitor: true },
    path: 'superuser',
    pathReason: 'role postgres is a superuser',
  };
  return {
    ...base,
    ...patch,
    slots: { ...base.slots, ...patch.slots },
    walSenders: { ...base.walSenders, ...patch.walSenders },
    role: { ...base.role, ...patch.role },
  };
}

const nonSuperuser = { name: 'deployer', superuser: false, createRole: true, replication: true, canCreateInDatabase: true, canGrantRdsReplication: false, cloudSqlSuperuser: false, canGrantPgMonitor: false };

describe('preflightProblems', () => {
  it('is empty for a server and role that can carry the pipeline', () => {
    expect(preflightProblems(facts())).toEqual([]);
  });

  it("wal_level 'replica' is a problem naming the fix", () => {
    const problems = preflightProblems(facts({ walLevel: 'replica' }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain("'replica'");
    expect(problems[0]).toContain('ALTER SYSTEM SET wal_level = logical');
  });

  it('PostgreSQL 12 (120000) is too old; 13.0 (130000) is enough', () => {
    const problems = preflightProblems(facts({ version: '12.17', versionNum: 120017 }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('12.17');
    expect(problems[0]).toContain('13 or newer');
    expect(preflightProblems(facts({ version: '12.0', versionNum: 120000 }))).toHaveLength(1);
    expect(preflightProblems(facts({ version: '13.0', versionNum: 130000 }))).toEqual([]);
  });

  it('all slots used but one of them is ours: no slot problem', () => {
    expect(preflightProblems(facts({ slots: { max: 4, used: 4, ours: true } }))).toEqual([]);
  });

  it('all slots used and none is ours: a problem naming max_replication_slots and the counts', () => {
    const problems = preflightProblems(facts({ slots: { max: 4, used: 4, ours: false } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('max_replication_slots = 4');
    expect(problems[0]).toContain('4 are used');
  });

  it('one free slot is enough', () => {
    expect(preflightProblems(facts({ slots: { max: 4, used: 3, ours: false } }))).toEqual([]);
  });

  it('no free WAL sender is a problem naming max_wal_senders', () => {
    const problems = preflightProblems(facts({ walSenders: { max: 2, used: 2 } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('max_wal_senders = 2');
  });

  it('PG15, not superuser, with CREATEROLE (and REPLICATION, CREATE): a role problem — creating a REPLICATION role needs SUPERUSER before 16', () => {
    const problems = preflightProblems(facts({ version: '15.6', versionNum: 150006, role: nonSuperuser }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('role deployer cannot provision');
    expect(problems[0]).toContain('SUPERUSER');
    expect(problems[0]).toContain('superuser=false');
  });

  it('PG16, not superuser, with CREATEROLE + REPLICATION + CREATE on the database: OK', () => {
    expect(preflightProblems(facts({ version: '16.2', versionNum: 160002, role: nonSuperuser }))).toEqual([]);
  });

  it.each([
    ['REPLICATION', { replication: false }, 'it lacks REPLICATION'],
    ['CREATEROLE', { createRole: false }, 'has no CREATEROLE'],
    ['CREATE on the database', { canCreateInDatabase: false }, 'GRANT CREATE ON DATABASE app TO deployer'],
  ])('PG16, not superuser, missing %s: a role problem naming it', (_missing, patch, says) => {
    const problems = preflightProblems(facts({ role: { ...nonSuperuser, ...patch } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(says);
  });

  it('PG15 or 16 without REPLICATION but allowed to grant rds_replication (RDS / Aurora): OK', () => {
    const rds = { ...nonSuperuser, replication: false, canGrantRdsReplication: true };
    expect(preflightProblems(facts({ version: '15.6', versionNum: 150006, role: rds }))).toEqual([]);
    expect(preflightProblems(facts({ role: rds }))).toEqual([]);
  });

  it('a member of cloudsqlsuperuser (Cloud SQL) with CREATEROLE: OK on 15 and 16', () => {
    const cloudSql = { ...nonSuperuser, replication: false, cloudSqlSuperuser: true };
    expect(preflightProblems(facts({ version: '15.6', versionNum: 150006, role: cloudSql }))).toEqual([]);
    expect(preflightProblems(facts({ role: cloudSql }))).toEqual([]);
  });

  it('a superuser passes even without the other attributes', () => {
    expect(
      preflightProblems(facts({ version: '14.1', versionNum: 140001, role: { superuser: true, createRole: false, replication: false, canCreateInDatabase: false } })),
    ).toEqual([]);
  });

  it('reports every problem at once', () => {
    const problems = preflightProblems(
      facts({
        version: '12.3',
        versionNum: 120003,
        walLevel: 'minimal',
        slots: { max: 1, used: 1, ours: false },
        walSenders: { max: 0, used: 0 },
        role: { ...nonSuperuser, createRole: false },
      }),
    );
    expect(problems).toHaveLength(5);
  });
});

describe('assertPreflight', () => {
  it('passes quietly for good facts', () => {
    expect(() => assertPreflight(facts())).not.toThrow();
  });

  it('throws PREFLIGHT_FAILED listing all problems in the message and the details', () => {
    const bad = facts({ walLevel: 'replica', slots: { max: 2, used: 2, ours: false }, versionNum: 120000, version: '12.0' });
    const expected = preflightProblems(bad);
    expect(expected).toHaveLength(3);
    let error: unknown;
    try {
      assertPreflight(bad);
    } catch (e) {
      error = e;
    }
    expect(isOutboxError(error, 'PREFLIGHT_FAILED')).toBe(true);
    if (!isOutboxError(error)) return;
    for (const problem of expected) expect(error.message).toContain(problem);
    expect(error.details.problems).toEqual(expected);
  });
});
