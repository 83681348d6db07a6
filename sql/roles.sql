-- Least-privilege roles, applied on every `db:provision` (idempotent; not a recorded migration, since
-- roles are cluster-wide and their names are settings). The roles are created first, in code (CREATE ROLE
-- has no IF NOT EXISTS), and their passwords are set separately, as SCRAM verifiers. The application
-- role's row-level security policy on the outbox is kept in code too (src/provision/row-policy.ts).
-- An existing role may have been created with more: bring it back to exactly what it needs.
ALTER ROLE ${cdcRole} LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE ${appRole} LOGIN NOREPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE ${monitorRole} LOGIN NOREPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;

-- Grants drift (a hand-made GRANT, an older release): start every run from nothing on our tables, so
-- what follows is exactly what each role has. One transaction: no moment without the grants below.
-- Revoking a table privilege revokes the column privileges of that table too.
REVOKE ALL ON ${outbox}, ${inbox}, ${heartbeat}, ${migrations} FROM ${cdcRole}, ${appRole}, ${monitorRole};
REVOKE CREATE ON SCHEMA ${schema} FROM ${cdcRole}, ${appRole}, ${monitorRole};
REVOKE CREATE ON DATABASE ${database} FROM ${cdcRole}, ${appRole}, ${monitorRole};

GRANT CONNECT ON DATABASE ${database} TO ${cdcRole}, ${appRole}, ${monitorRole};
GRANT USAGE ON SCHEMA ${schema} TO ${cdcRole}, ${appRole};

-- CDC (Debezium): reads the published tables; writes only the heartbeat row (heartbeat.action.query).
GRANT SELECT ON ${outbox}, ${heartbeat} TO ${cdcRole};
GRANT INSERT, UPDATE ON ${heartbeat} TO ${cdcRole};

-- Application: inserts events, only the columns the writer fills (created_at, published_at and attempts
-- keep their defaults, so an event cannot be back-dated or marked published for the polling relay).
-- DELETE, plus SELECT of the key it deletes by, serves writers with deleteAfterInsert; the row policy
-- limits both to rows of the application's own transaction.
GRANT INSERT (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent, headers) ON ${outbox} TO ${appRole};
GRANT DELETE ON ${outbox} TO ${appRole};
GRANT SELECT (id) ON ${outbox} TO ${appRole};

-- Watchdog: the monitoring views (pg_replication_slots, pg_stat_replication, pg_current_wal_lsn()).
GRANT pg_monitor TO ${monitorRole};
