-- Outbox cleanup under CDC, second part (docs/operations.md, "Outbox cleanup under CDC"). Three changes
-- to 011's function, whose proof (a confirmed mark frees the rows of transactions that ended before it,
-- from the slot's floor up) is unchanged.
--
-- 1. Only a registered slot is proof. 011 accepted any logical slot of the database: a slot someone
-- made by hand confirms whatever its reader likes. connector:deploy registers the connector's slot
-- (a row in the registrations table); a slot of a connector deployed by other means is registered by
-- hand: INSERT INTO outbox_cleanup_registrations (slot_name, registered_by) VALUES ('<slot>', 'manual').
-- For any other slot the function deletes nothing, changes nothing, and says 'unregistered'.
--
-- 2. The same slot, not only the same name. The floor is valid only for the slot that existed when it
-- was recorded: a slot dropped and re-created under the same name between two runs (a failover without
-- failover slots, a manual drop, an invalidated slot replaced) never decoded the transactions that
-- committed before it, yet the old floor and marks cover them, and the new slot's position (beyond
-- every old mark) "confirms" them. pg_replication_slots has no identity or creation time, so each run
-- records what it saw (confirmed_flush_lsn, restart_lsn and, from PostgreSQL 14, the slot's statistics
-- in pg_stat_replication_slots: total_txns, total_bytes, stats_reset) and the next run treats the slot
-- as re-created, forgetting floor and marks as if it had been missing, when any of these holds:
--   - confirmed_flush_lsn or restart_lsn is behind what was seen (one slot never moves back; a
--     re-created one starts beyond, so this alone proves nothing, but a lagging copy after a failover
--     is caught);
--   - (14+) the statistics row is missing, stats_reset changed, or total_txns or total_bytes is lower
--     than seen. A slot's counters only grow; a new slot's start at zero. A stats reset, or a crash that
--     loses the statistics, looks the same: the safe side.
-- And a mark frees rows only once the slot has decoded at least one transaction since the mark was
-- taken (14+: total_txns above the count recorded with the mark). The slot that took the mark has to
-- decode the very transaction that recorded it, whose commit follows the mark, so a streaming slot
-- qualifies within a run; a re-created slot that has not streamed yet (Debezium fails its task on a
-- re-created slot under a stored offset) does not. But a peek (pg_logical_slot_peek_*) decodes too and
-- raises the same counters without confirming anything: the drop guard and outbox:switch-to-relay, which
-- peek, delete the slot's marks in the peek's transaction (a later run takes a new one), and a peek by
-- hand weakens this check until the next mark.
-- A slot judged re-created gets a new floor: rows below it stay (a false "re-created" only keeps rows;
-- see the one-off below).
-- What this cannot detect: on PostgreSQL 13 (no slot statistics), a slot re-created between two runs
-- at all, unless a run found it missing; on 14 and later, a slot re-created between two runs that by
-- the next run has decoded at least as many transactions and bytes as the old one had when last seen
-- (a young slot replaced quickly). Hence the deploy paths that replace a slot or reset a stored offset
-- (connector:delete --drop-slot, connector:deploy --resnapshot, connector:deploy --force resetting
-- offsets) forget the slot's state themselves, and the documented recovery steps use them.
--
-- 3. Rows below the floor, and the backlog. 011's batch walked the (created_at) index from the oldest
-- row and filtered on tx_id, so every batch rescanned every row below the floor (all of a pre-011
-- table: tx_id NULL) before finding one to delete. The batch now walks a partial index on tx_id from the
-- floor up. The rows below the floor get a guarded one-off (below_floor function, `outbox outbox:cleanup
-- --below-floor`): it deletes them only while the registered slot, watched by the cleanup, has confirmed
-- a mark (it streams), only rows of transactions that ended before that mark, and only when the
-- operator says they were streamed or are not needed. Each run stores the newest usable mark's
-- snapshot_xmin, so the watchdog's backlog under CDC is the rows the slot has not confirmed (tx_id at
-- or above it, or above the floor before any mark), not the oldest row left in the table.
--
-- Upgrade: 011's state has no observations to compare with, so it is forgotten (each slot gets a new
-- floor at its next run; rows between stay, for the one-off), and the slots 011 had seen are
-- registered, so a running cleanup keeps working.

CREATE TABLE ${outboxCleanupRegistrations} (
  slot_name     text        PRIMARY KEY,
  registered_at timestamptz NOT NULL DEFAULT now(),
  registered_by text        NOT NULL
);
INSERT INTO ${outboxCleanupRegistrations} (slot_name, registered_by) SELECT s.slot_name, 'migration 012' FROM ${outboxCleanupSlots} s;

DELETE FROM ${outboxCleanupMarks};
DELETE FROM ${outboxCleanupSlots};
-- What the last run saw of the slot (see 2.), and the newest usable mark's snapshot_xmin (see 3.).
ALTER TABLE ${outboxCleanupSlots}
  ADD COLUMN seen_at            timestamptz NOT NULL,
  ADD COLUMN seen_confirmed_lsn pg_lsn      NOT NULL,
  ADD COLUMN seen_restart_lsn   pg_lsn      NULL,
  ADD COLUMN seen_total_txns    bigint      NULL,
  ADD COLUMN seen_total_bytes   bigint      NULL,
  ADD COLUMN seen_stats_reset   timestamptz NULL,
  ADD COLUMN safe_xmin          bigint      NULL;
-- The slot's total_txns when the mark was taken (NULL on 13).
ALTER TABLE ${outboxCleanupMarks} ADD COLUMN slot_total_txns bigint NULL;

-- Migrations run in one transaction, so this cannot be CONCURRENTLY; it holds a SHARE lock on the outbox
-- (writers wait) while it builds. On a large outbox create it first, by hand, with the same name:
-- CREATE INDEX CONCURRENTLY outbox_tx_id_idx ON outbox (tx_id) WHERE published_at IS NULL
-- (check it is valid: a failed concurrent build leaves an INVALID index that this statement would skip).
CREATE INDEX IF NOT EXISTS ${outboxTxIdIndex} ON ${outbox} (tx_id) WHERE published_at IS NULL;

DROP FUNCTION ${outboxCleanupFunction}(text, integer);
-- One batch per call, as 011's. refused: why this call deleted nothing on principle ('unregistered',
-- 'recreated': state forgotten, new floor; 'statistics-missing': 14+ without a statistics row); NULL else.
CREATE FUNCTION ${outboxCleanupFunction}(p_slot text, p_limit integer)
RETURNS TABLE (deleted integer, slot_found boolean, confirmed_flush_lsn pg_lsn, safe_lsn pg_lsn, safe_taken_at timestamptz, pending_lsn pg_lsn, refused text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_confirmed pg_lsn;
  v_restart   pg_lsn;
  v_has_stats boolean := current_setting('server_version_num')::int >= 140000;
  v_txns      bigint;
  v_bytes     bigint;
  v_reset     timestamptz;
  v_seen      ${outboxCleanupSlots}%ROWTYPE;
  v_safe      ${outboxCleanupMarks}%ROWTYPE;
  v_pending   pg_lsn;
  v_xmin      bigint;
  v_lsn       pg_lsn;
  v_deleted   integer := 0;
  v_refused   text;
  v_registered boolean;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 THEN
    RAISE EXCEPTION 'outbox cleanup: batch size must be at least 1, got %', p_limit USING ERRCODE = '22023';
  END IF;
  -- Two callers (the watchdog and a cron job) judge and record one after the other: the registration
  -- row is locked before the slot is read, so a caller never compares a position it read before another
  -- caller recorded a later one (which would look like a slot moving back: a false 're-created').
  PERFORM 1 FROM ${outboxCleanupRegistrations} r WHERE r.slot_name = p_slot FOR UPDATE;
  v_registered := FOUND;
  SELECT s.confirmed_flush_lsn, s.restart_lsn INTO v_confirmed, v_restart
    FROM pg_replication_slots s
   WHERE s.slot_name = p_slot AND s.slot_type = 'logical' AND s.database = current_database();
  IF NOT FOUND THEN
    -- Gone: forget its floor and marks, so a slot created later under this name starts from a new floor.
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
    DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
    RETURN QUERY SELECT 0, false, NULL::pg_lsn, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn,
      CASE WHEN v_registered THEN NULL ELSE 'unregistered' END;
    RETURN;
  END IF;
  IF NOT v_registered THEN
    RETURN QUERY SELECT 0, true, v_confirmed, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn, 'unregistered'::text;
    RETURN;
  END IF;
  IF v_confirmed IS NULL THEN
    RETURN QUERY SELECT 0, true, NULL::pg_lsn, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn, NULL::text;
    RETURN;
  END IF;
  IF v_has_stats THEN
    -- Read only from 14 on: PL/pgSQL resolves the view when it first runs this statement.
    SELECT st.total_txns, st.total_bytes, st.stats_reset INTO v_txns, v_bytes, v_reset
      FROM pg_stat_replication_slots st WHERE st.slot_name = p_slot;
    IF NOT FOUND THEN
      DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
      DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
      RETURN QUERY SELECT 0, true, v_confirmed, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn, 'statistics-missing'::text;
      RETURN;
    END IF;
  END IF;

  SELECT f.* INTO v_seen FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot FOR UPDATE;
  IF FOUND AND (
       v_confirmed < v_seen.seen_confirmed_lsn
    OR (v_restart IS NOT NULL AND (v_seen.seen_restart_lsn IS NULL OR v_restart < v_seen.seen_restart_lsn))
    OR (v_has_stats AND (v_seen.seen_total_txns IS NULL OR v_txns < v_seen.seen_total_txns OR v_bytes < v_seen.seen_total_bytes
                         OR v_reset IS DISTINCT FROM v_seen.seen_stats_reset))) THEN
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
    DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
    v_refused := 'recreated';
    v_seen := NULL;
  END IF;
  IF v_seen.slot_name IS NULL THEN
    INSERT INTO ${outboxCleanupSlots} (slot_name, floor_tx_id, first_seen_at, seen_at, seen_confirmed_lsn, seen_restart_lsn, seen_total_txns, seen_total_bytes, seen_stats_reset)
      VALUES (p_slot, pg_snapshot_xmax(pg_current_snapshot())::text::bigint, clock_timestamp(), clock_timestamp(), v_confirmed, v_restart, v_txns, v_bytes, v_reset)
      ON CONFLICT (slot_name) DO NOTHING;
    SELECT f.* INTO v_seen FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot FOR UPDATE;
  END IF;

  SELECT m.* INTO v_safe FROM ${outboxCleanupMarks} m
   WHERE m.slot_name = p_slot AND m.lsn <= v_confirmed AND (NOT v_has_stats OR m.slot_total_txns < v_txns)
   ORDER BY m.lsn DESC LIMIT 1;
  IF v_safe.lsn IS NOT NULL THEN
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot AND m.lsn < v_safe.lsn;
    -- From the floor up through the (tx_id) WHERE published_at IS NULL index: rows below the floor are
    -- never visited. Rows the polling relay published are its own to delete.
    WITH doomed AS (
      SELECT o.id FROM ${outbox} o
       WHERE o.published_at IS NULL AND o.tx_id >= v_seen.floor_tx_id AND o.tx_id < v_safe.snapshot_xmin
       ORDER BY o.tx_id
       LIMIT p_limit
    )
    DELETE FROM ${outbox} o USING doomed d WHERE o.id = d.id;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
  END IF;
  UPDATE ${outboxCleanupSlots} f
     SET seen_at = clock_timestamp(), seen_confirmed_lsn = v_confirmed, seen_restart_lsn = v_restart,
         seen_total_txns = v_txns, seen_total_bytes = v_bytes, seen_stats_reset = v_reset,
         safe_xmin = COALESCE(v_safe.snapshot_xmin, f.safe_xmin)
   WHERE f.slot_name = p_slot;

  -- The mark waiting to become usable (not confirmed, or confirmed before the slot decoded anything since).
  SELECT m.lsn INTO v_pending FROM ${outboxCleanupMarks} m
   WHERE m.slot_name = p_slot AND (v_safe.lsn IS NULL OR m.lsn > v_safe.lsn) ORDER BY m.lsn LIMIT 1;
  IF v_pending IS NULL THEN
    -- Two statements, in this order: the snapshot first, then the insert position.
    v_xmin := pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
    v_lsn := pg_current_wal_insert_lsn();
    INSERT INTO ${outboxCleanupMarks} (slot_name, lsn, snapshot_xmin, taken_at, slot_total_txns) VALUES (p_slot, v_lsn, v_xmin, clock_timestamp(), v_txns)
      ON CONFLICT DO NOTHING;
    v_pending := v_lsn;
  END IF;
  RETURN QUERY SELECT v_deleted, true, v_confirmed, v_safe.lsn, v_safe.taken_at, v_pending, v_refused;
END
$fn$;
REVOKE ALL ON FUNCTION ${outboxCleanupFunction}(text, integer) FROM PUBLIC;

-- The one-off for rows below the floor (see 3.): one batch per call; p_dry_run counts instead. Only for
-- a registered slot the cleanup watches (it has a floor) that has confirmed a usable mark; only rows of
-- transactions below both the floor and that mark's snapshot_xmin (ended before it, whatever their
-- age); tx_id NULL rows (written before 011) included. Not granted to any role: the admin runs it.
CREATE FUNCTION ${outboxCleanupBelowFloorFunction}(p_slot text, p_limit integer, p_dry_run boolean)
RETURNS TABLE (affected bigint, floor_tx_id bigint, bound_tx_id bigint, refused text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_seen  ${outboxCleanupSlots}%ROWTYPE;
  v_bound bigint;
  v_n     bigint := 0;
  v_more  bigint;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 THEN
    RAISE EXCEPTION 'outbox cleanup: batch size must be at least 1, got %', p_limit USING ERRCODE = '22023';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM ${outboxCleanupRegistrations} r WHERE r.slot_name = p_slot) THEN
    RETURN QUERY SELECT 0::bigint, NULL::bigint, NULL::bigint, 'unregistered'::text;
    RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.slot_name = p_slot AND s.slot_type = 'logical' AND s.database = current_database()) THEN
    RETURN QUERY SELECT 0::bigint, NULL::bigint, NULL::bigint, 'no-slot'::text;
    RETURN;
  END IF;
  SELECT f.* INTO v_seen FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
  IF v_seen.slot_name IS NULL OR v_seen.safe_xmin IS NULL THEN
    RETURN QUERY SELECT 0::bigint, v_seen.floor_tx_id, NULL::bigint, 'no-confirmed-mark'::text;
    RETURN;
  END IF;
  v_bound := least(v_seen.floor_tx_id, v_seen.safe_xmin);
  IF p_dry_run IS NOT FALSE THEN -- NULL counts too: only an explicit false deletes
    SELECT count(*) INTO v_n FROM ${outbox} o WHERE o.published_at IS NULL AND (o.tx_id IS NULL OR o.tx_id < v_bound);
  ELSE
    -- Two index scans (NULL, then the range) rather than one OR, each through the tx_id index.
    WITH doomed AS (SELECT o.id FROM ${outbox} o WHERE o.published_at IS NULL AND o.tx_id IS NULL LIMIT p_limit)
    DELETE FROM ${outbox} o USING doomed d WHERE o.id = d.id;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n < p_limit THEN
      WITH doomed AS (SELECT o.id FROM ${outbox} o WHERE o.published_at IS NULL AND o.tx_id < v_bound ORDER BY o.tx_id LIMIT p_limit - v_n)
      DELETE FROM ${outbox} o USING doomed d WHERE o.id = d.id;
      GET DIAGNOSTICS v_more = ROW_COUNT;
      v_n := v_n + v_more;
    END IF;
  END IF;
  RETURN QUERY SELECT v_n, v_seen.floor_tx_id, v_bound, NULL::text;
END
$fn$;
REVOKE ALL ON FUNCTION ${outboxCleanupBelowFloorFunction}(text, integer, boolean) FROM PUBLIC;
