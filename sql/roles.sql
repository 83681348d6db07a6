-- Least-privilege roles' grants, applied on every `db:provision` (idempotent; not a recorded migration,
-- since roles are cluster-wide and their names are settings). The roles themselves (creation, SCRAM
-- passwords, attributes, the CDC role's right to replicate and the watchdog's pg_monitor) are set in code
-- (src/provision/role-setup.ts), which changes only what differs: an admin that is not a superuser may
-- not touch attributes it lacks itself. The application role's row-level security policy on the outbox is
-- kept in code too (src/provision/row-policy.ts).

-- CVE-2018-1058: before PostgreSQL 15 every role may CREATE in schema public, so any login could plant
-- a function or operator there that shadows a built-in one another role then runs. 15+ revokes it by
-- default; on 13 and 14 do it here (a no-op where already revoked, skipped where public was dropped).
DO $$ BEGIN
  IF to_regnamespace('public') IS NOT NULL THEN REVOKE CREATE ON SCHEMA public FROM PUBLIC; END IF;
END $$;

-- Grants drift (a hand-made GRANT or REVOKE, an older release): start every run from nothing on our
-- tables, so what follows is exactly what each role has. One transaction: no moment without the grants
-- below. Revoking a table privilege revokes the column privileges of that table too.
REVOKE ALL ON ${outbox}, ${inbox}, ${parked}, ${heartbeat}, ${migrations} FROM ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE ALL ON ${outboxCleanupMarks}, ${outboxCleanupSlots}, ${outboxCleanupRegistrations}, ${topicPartitions} FROM ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE ALL ON FUNCTION ${outboxCleanupFunction}(text, integer) FROM PUBLIC, ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE ALL ON FUNCTION ${outboxCleanupBelowFloorFunction}(text, integer, boolean) FROM PUBLIC, ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE ALL ON SEQUENCE ${parkedSequence} FROM ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE CREATE ON SCHEMA ${schema} FROM ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
REVOKE CREATE ON DATABASE ${database} FROM ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};

GRANT CONNECT ON DATABASE ${database} TO ${cdcRole}, ${appRole}, ${monitorRole}, ${routerRole}, ${relayRole};
GRANT USAGE ON SCHEMA ${schema} TO ${cdcRole}, ${appRole}, ${routerRole}, ${relayRole};

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

-- Watchdog: the monitoring views (pg_replication_slots, pg_stat_replication, pg_current_wal_lsn()) through
-- pg_monitor, granted in code (src/provision/role-setup.ts: it needs ADMIN OPTION on pg_monitor).
-- Here the outbox's health (src/watchdog/outbox-query.ts): the age of the oldest row still waiting
-- (published_at IS NULL) reads the table itself, so the schema's USAGE and SELECT of just the two columns
-- that query touches; never the payload or the keys. Here and not in a migration: this file revokes
-- everything on our tables first on every run, so a migration's grant would not survive it.
GRANT USAGE ON SCHEMA ${schema} TO ${monitorRole};
GRANT SELECT (created_at, published_at) ON ${outbox} TO ${monitorRole};
-- …and runs the outbox cleanup under CDC (migration 011): a SECURITY DEFINER function that deletes only
-- rows the slot has confirmed. Under CDC "waiting" is "not confirmed by the slot yet" (migration 012):
-- the writing transaction's id and the cleanup's per-slot positions, still nothing of the payload.
GRANT EXECUTE ON FUNCTION ${outboxCleanupFunction}(text, integer) TO ${monitorRole};
-- …or, with outbox.cleanupMode 'partition', makes partitions ahead and drops confirmed ones (migration 015).
GRANT EXECUTE ON FUNCTION ${outboxPartitionsFunction}(text, integer, integer, integer) TO ${monitorRole};
GRANT SELECT (tx_id) ON ${outbox} TO ${monitorRole};
GRANT SELECT (slot_name, floor_tx_id, safe_xmin) ON ${outboxCleanupSlots} TO ${monitorRole};

-- Router: records applied events in the inbox (INSERT … ON CONFLICT DO NOTHING RETURNING) and prunes
-- the rows past router.inboxRetentionMs (DELETE), and parks, lists and releases dead-lettered keys
-- (dlq:replay, dlq:release), the serial column's sequence included. Nothing on the outbox. The
-- handlers' own tables are the user's to grant.
GRANT SELECT, INSERT, DELETE ON ${inbox} TO ${routerRole};
GRANT SELECT, INSERT, DELETE ON ${parked} TO ${routerRole};
GRANT USAGE ON SEQUENCE ${parkedSequence} TO ${routerRole};
-- …and, for a partitioned inbox (migration 016), adds time partitions ahead and drops those past the
-- window through two SECURITY DEFINER functions: no DDL right on the inbox itself.
REVOKE ALL ON FUNCTION ${inboxPartitionAdd}(bigint, bigint), ${inboxPartitionDrop}(text, text, timestamptz, integer) FROM PUBLIC, ${cdcRole}, ${appRole}, ${monitorRole}, ${relayRole};
GRANT EXECUTE ON FUNCTION ${inboxPartitionAdd}(bigint, bigint), ${inboxPartitionDrop}(text, text, timestamptz, integer) TO ${routerRole};

-- Polling relay: claims rows (SELECT … FOR UPDATE, which the column UPDATE grant allows), marks them
-- published and counts attempts, and deletes published rows after relay.retentionMs. It cannot insert
-- events or change their content. Advisory locks need no grant.
GRANT SELECT, DELETE ON ${outbox} TO ${relayRole};
GRANT UPDATE (published_at, attempts) ON ${outbox} TO ${relayRole};
