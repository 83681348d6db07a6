/** What /readyz says while a hop refuses the router (src/router/credential-watch.ts). */
import { DatabaseError, Pool } from 'pg';
import { OutboxError } from '../../../src/errors';
import { classifyDatabaseFailure, createCredentialWatch, refusalFields } from '../../../src/router/credential-watch';

describe('credential watch', () => {
  it('remembers the refusal a router.wait reports (code, hop, principal, message, since) until work goes through', () => {
    let clock = 10_000;
    const watch = createCredentialWatch(() => clock);
    watch.onEvent('router.wait', { code: 'DB_UNAVAILABLE', error: 'down' });
    expect(watch.current()).toBeUndefined();
    watch.onEvent('router.wait', { code: 'DB_AUTH_FAILED', hop: 'postgres', principal: 'outbox_router', error: 'PostgreSQL at db:5432/app refused the credentials as "outbox_router"' });
    clock += 4_000;
    watch.onEvent('router.wait', { code: 'DB_AUTH_FAILED', hop: 'postgres', principal: 'outbox_router', error: 'again' });
    expect(watch.current()).toEqual({ code: 'DB_AUTH_FAILED', hop: 'postgres', principal: 'outbox_router', message: 'again', seconds: 4 });
    watch.onEvent('router.applied', {});
    expect(watch.current()).toBeUndefined();
  });

  it('takes a classified kafkajs crash directly, and a group join clears it', () => {
    const watch = createCredentialWatch(() => 0);
    watch.failed(new Error('not classified'));
    expect(watch.current()).toBeUndefined();
    watch.failed(new OutboxError('KAFKA_ACL_DENIED', 'denied (GROUP_AUTHORIZATION_FAILED)', { retriable: true, details: { hop: 'kafka', principal: 'outbox-router' } }));
    expect(watch.current()).toMatchObject({ code: 'KAFKA_ACL_DENIED', hop: 'kafka', principal: 'outbox-router' });
    watch.onEvent('router.group-join', {});
    expect(watch.current()).toBeUndefined();
  });

  it("classifies a pool's refused password with the pool's host, database and role; other errors pass through", async () => {
    const pool = new Pool({ host: 'db.internal', port: 6432, database: 'app', user: 'outbox_router', password: 'not-shown' });
    const refused = Object.assign(new DatabaseError('password authentication failed for user "outbox_router"', 0, 'error'), { code: '28P01' });
    const classified = classifyDatabaseFailure(refused, pool) as OutboxError;
    expect(classified.code).toBe('DB_AUTH_FAILED');
    expect(classified.message).toContain('db.internal:6432/app');
    expect(classified.message).not.toContain('not-shown');
    expect(refusalFields(classified)).toEqual({ hop: 'postgres', principal: 'outbox_router' });
    const other = new Error('connection terminated');
    expect(classifyDatabaseFailure(other, pool)).toBe(other);
    await pool.end();
  });
});
