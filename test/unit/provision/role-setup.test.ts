/**
 * src/provision/role-setup.ts: attributeChanges decides which ALTER ROLE clauses a role needs. An admin
 * that is not a superuser may not even restate an attribute it lacks (PostgreSQL 16+ refuses
 * `ALTER ROLE x NOSUPERUSER` from it), so a role that is already right must get no clause at all.
 */
import { attributeChanges } from '../../../src/provision/role-setup';

const plain = { rolcanlogin: true, rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolbypassrls: false, rolreplication: false };

describe('attributeChanges', () => {
  it('a role that is already right gets no clause; the CDC role needs REPLICATION as its attribute', () => {
    expect(attributeChanges(plain, 'app', 'attribute')).toEqual([]);
    expect(attributeChanges({ ...plain, rolreplication: true }, 'cdc', 'attribute')).toEqual([]);
    expect(attributeChanges(plain, 'cdc', 'attribute')).toEqual(['REPLICATION']);
  });

  it('every extra attribute is removed, and LOGIN restored', () => {
    const everything = { rolcanlogin: false, rolsuper: true, rolcreatedb: true, rolcreaterole: true, rolbypassrls: true, rolreplication: true };
    expect(attributeChanges(everything, 'router', 'attribute')).toEqual(['LOGIN', 'NOSUPERUSER', 'NOCREATEDB', 'NOCREATEROLE', 'NOBYPASSRLS', 'NOREPLICATION']);
  });

  it('through rds_replication the CDC role’s REPLICATION attribute is left as found (changing it needs REPLICATION)', () => {
    expect(attributeChanges(plain, 'cdc', 'rds_replication')).toEqual([]);
    expect(attributeChanges({ ...plain, rolreplication: true }, 'cdc', 'rds_replication')).toEqual([]);
    expect(attributeChanges({ ...plain, rolreplication: true }, 'monitor', 'rds_replication')).toEqual(['NOREPLICATION']);
  });
});
