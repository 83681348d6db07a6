-- Least-privilege roles, applied on every `db:provision` (idempotent; not a recorded migration, since
-- roles are cluster-wide and their names are settings). The roles are created first, in code (CREATE ROLE
-- has no IF NOT EXISTS), and their passwords are set separately, as SCRAM verifiers.
-- An existing role may have been created with more: bring it back to exactly what it needs.
ALTER ROLE ${cdcRole} LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE ${appRole} LOGIN NOREPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
ALTER ROLE ${monitorRole} LOGIN NOREPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;

GRANT CONNECT ON DATABASE ${database} TO ${cdcRole}, ${appRole}, ${monitorRole};
GRANT USAGE ON SCHEMA ${schema} TO ${cdcRole}, ${appRole};

-- CDC (Debezium): reads the published tables; writes only the heartbeat row (heartbeat.action.query).
GRANT SELECT ON ${outbox}, ${heartbeat} TO ${cdcRole};
GRANT INSERT, UPDATE ON ${heartbeat} TO ${cdcRole};

-- Application: inserts events; DELETE (plus SELECT of the key it deletes by) for insert-then-delete.
GRANT INSERT, DELETE ON ${outbox} TO ${appRole};
GRANT SELECT (id) ON ${outbox} TO ${appRole};

-- Watchdog: the monitoring views (pg_replication_slots, pg_stat_replication, pg_current_wal_lsn()).
GRANT pg_monitor TO ${monitorRole};
