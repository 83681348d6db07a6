-- Outbox cleanup under CDC (docs/operations.md, "Outbox cleanup"): delete only rows the connector's
-- replication slot has provably read, never by age alone.
--
-- The proof. A mark is (x, l): x = the xmin of a snapshot (every transaction with a smaller id had
-- ended when it was taken), then l = the WAL insert position. A committed transaction that ended
-- before the snapshot wrote its commit record before it left the process array, so the record ends
-- at or before l. Once the slot's confirmed_flush_lsn reaches l, logical decoding will never send
-- those transactions again: their rows are on Kafka (Debezium confirms an LSN only after Connect has
-- committed the offsets of the records before it), and keeping them serves nobody. Rows of
-- transactions at or after x wait for a later mark. A paused, failed or deleted connector confirms
-- nothing, so nothing more is deleted; a lost slot keeps its last confirmed position, so only rows it
-- had read go; a missing slot deletes nothing.
--
-- The floor. A slot decodes only transactions that commit after it was created: rows committed before
-- were never read, although every later mark covers them. So the first time the cleanup sees a slot it
-- records a floor, the xmax of a snapshot (every transaction at or above it starts later, so commits
-- while the slot exists), and never deletes rows below it: rows from before the cleanup first ran,
-- rows from before this migration (tx_id NULL) included. connector:delete --drop-slot forgets the
-- slot's floor and marks, so a recreated slot gets a new floor.

-- The writing transaction's full id (xid8 as bigint, so every PostgreSQL from 13 and Debezium read it as
-- a plain number). The default stamps it; the application's INSERT grant leaves it out, so a writer
-- cannot forge it. Rows written before this migration keep NULL: they all ended before any mark, which
-- is only taken from now on, so a confirmed mark covers them. No table rewrite: the column is added
-- without a default and the default is set afterwards, for new rows only.
ALTER TABLE ${outbox} ADD COLUMN tx_id bigint NULL;
ALTER TABLE ${outbox} ALTER COLUMN tx_id SET DEFAULT (pg_current_xact_id()::text::bigint);

-- Per slot: the floor (see above) and when the cleanup first saw it.
CREATE TABLE ${outboxCleanupSlots} (
  slot_name     text        PRIMARY KEY,
  floor_tx_id   bigint      NOT NULL,
  first_seen_at timestamptz NOT NULL
);

-- At most one pending mark per slot (lsn beyond confirmed_flush_lsn), and the newest confirmed one.
CREATE TABLE ${outboxCleanupMarks} (
  slot_name text        NOT NULL,
  lsn       pg_lsn      NOT NULL,
  snapshot_xmin bigint  NOT NULL,
  taken_at  timestamptz NOT NULL,
  PRIMARY KEY (slot_name, lsn)
);

-- One batch per call, so each batch is its own short transaction: the caller (the watchdog, `outbox
-- outbox:cleanup`, or pg_cron) loops while a batch comes back full. SECURITY DEFINER: the watchdog's
-- role may run it (EXECUTE, sql/roles.sql) without any privilege on the outbox, and it can delete
-- nothing but what the proof allows. search_path is pinned so no one can shadow what it calls.
CREATE FUNCTION ${outboxCleanupFunction}(p_slot text, p_limit integer)
RETURNS TABLE (deleted integer, slot_found boolean, confirmed_flush_lsn pg_lsn, safe_lsn pg_lsn, safe_taken_at timestamptz, pending_lsn pg_lsn)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_confirmed pg_lsn;
  v_safe      ${outboxCleanupMarks}%ROWTYPE;
  v_pending   pg_lsn;
  v_xmin      bigint;
  v_lsn       pg_lsn;
  v_deleted   integer := 0;
  v_floor     bigint;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 THEN
    RAISE EXCEPTION 'outbox cleanup: batch size must be at least 1, got %', p_limit USING ERRCODE = '22023';
  END IF;
  SELECT s.confirmed_flush_lsn INTO v_confirmed
    FROM pg_replication_slots s
   WHERE s.slot_name = p_slot AND s.slot_type = 'logical' AND s.database = current_database();
  IF NOT FOUND THEN
    -- Gone: forget its floor and marks, so a slot created later under this name starts from a new floor.
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
    DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
    RETURN QUERY SELECT 0, false, NULL::pg_lsn, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn;
    RETURN;
  END IF;
  IF v_confirmed IS NULL THEN
    RETURN QUERY SELECT 0, true, NULL::pg_lsn, NULL::pg_lsn, NULL::timestamptz, NULL::pg_lsn;
    RETURN;
  END IF;

  SELECT f.floor_tx_id INTO v_floor FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
  IF v_floor IS NULL THEN
    v_floor := pg_snapshot_xmax(pg_current_snapshot())::text::bigint;
    INSERT INTO ${outboxCleanupSlots} (slot_name, floor_tx_id, first_seen_at) VALUES (p_slot, v_floor, clock_timestamp())
      ON CONFLICT (slot_name) DO NOTHING;
    SELECT f.floor_tx_id INTO v_floor FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
  END IF;

  SELECT m.* INTO v_safe FROM ${outboxCleanupMarks} m
   WHERE m.slot_name = p_slot AND m.lsn <= v_confirmed ORDER BY m.lsn DESC LIMIT 1;
  IF v_safe.lsn IS NOT NULL THEN
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot AND m.lsn < v_safe.lsn;
    -- Oldest first through the (created_at) WHERE published_at IS NULL index; created_at (the writer's
    -- transaction start) only bounds the scan: a transaction that ended before the snapshot started
    -- before the mark was taken. Rows the polling relay published are its own to delete. A NULL tx_id
    -- fails both comparisons: such rows stay.
    WITH doomed AS (
      SELECT o.id FROM ${outbox} o
       WHERE o.published_at IS NULL AND o.created_at <= v_safe.taken_at
         AND o.tx_id < v_safe.snapshot_xmin AND o.tx_id >= v_floor
       ORDER BY o.created_at
       LIMIT p_limit
    )
    DELETE FROM ${outbox} o USING doomed d WHERE o.id = d.id;
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
  END IF;

  SELECT m.lsn INTO v_pending FROM ${outboxCleanupMarks} m
   WHERE m.slot_name = p_slot AND m.lsn > v_confirmed ORDER BY m.lsn LIMIT 1;
  IF v_pending IS NULL THEN
    -- Two statements, in this order: the snapshot first, then the insert position.
    v_xmin := pg_snapshot_xmin(pg_current_snapshot())::text::bigint;
    v_lsn := pg_current_wal_insert_lsn();
    INSERT INTO ${outboxCleanupMarks} (slot_name, lsn, snapshot_xmin, taken_at) VALUES (p_slot, v_lsn, v_xmin, clock_timestamp())
      ON CONFLICT DO NOTHING;
    v_pending := v_lsn;
  END IF;
  RETURN QUERY SELECT v_deleted, true, v_confirmed, v_safe.lsn, v_safe.taken_at, v_pending;
END
$fn$;
REVOKE ALL ON FUNCTION ${outboxCleanupFunction}(text, integer) FROM PUBLIC;
