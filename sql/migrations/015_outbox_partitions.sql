-- Outbox cleanup under CDC by partition drop (docs/operations.md, "Partitioned outbox"), behind the
-- setting outbox.cleanupMode = 'partition'; 'delete' (migrations 011 and 012) stays the default. This
-- migration only creates the function: db:provision turns the outbox into a partitioned table when the
-- setting asks for it (src/provision/outbox-partitioned.ts), so a default install is unchanged.
--
-- The table. Range-partitioned on id itself: every id the toolkit's writer and adapters insert is a
-- UUIDv7 (src/producer/uuidv7.ts), whose first 48 bits are the Unix milliseconds, and uuid compares
-- byte by byte, so a range of ids is a range of milliseconds. The primary key (id) already contains the
-- partition key; no column is added. A partitioned outbox carries a CHECK that id is version 7, and an
-- id outside every partition is refused ("no partition of relation ... found for row"): both fail the
-- writer's transaction, never route a row somewhere it would be dropped early. The publication
-- publishes through the root (publish_via_partition_root), so Debezium sees one table and the Event
-- Router routes as before; new partitions are in the publication by being partitions of the root.
--
-- Partitions ahead. Each call makes sure partitions cover [the current window .. p_ahead windows
-- later] (windows of p_width_seconds, aligned to the Unix epoch, UTC names <table>_pYYYYMMDD_HH24MISS).
-- CREATE TABLE ... PARTITION OF locks the root: it waits at most p_lock_timeout_ms for running writers
-- (writers queue behind it meanwhile), and a timeout only postpones the work to the next call.
--
-- The drop, and why it loses nothing. The slot's state (registration, floor, re-creation checks, marks)
-- is 012's, unchanged, and its proof too: a confirmed mark (x, l) covers every transaction with an id
-- below x (it had ended, so its commit record is at or before l), and a transaction with an id at or
-- above the floor committed while the slot existed, so the slot decoded it. 012 applies the proof row
-- by row (tx_id, the writing transaction's id, is stamped by a default the writer cannot forge); here
-- it is applied to every row of a partition at once, under locks that make "every row" mean every row:
--   1. The candidate is a partition whose window ended at least one window ago (writers' clocks may lag
--      the database's; an id in a dropped window is refused, not lost, but a writer should not meet that).
--   2. LOCK the root, then the partition, ACCESS EXCLUSIVE (the order DROP takes them), waiting at most
--      p_lock_timeout_ms. Every transaction that inserted into the partition holds ROW EXCLUSIVE on it
--      (tuple routing locks the partition it routes to; a direct insert locks it too) until it ends, so
--      once the lock is ours every such transaction has committed or rolled back, and none can start
--      inserting until this transaction ends, when the partition is gone. An uncommitted row, which no
--      snapshot could see, cannot exist: what the checks read is all there is.
--   3. Among the rows the CDC path owns (published_at IS NULL; rows the polling relay published are its
--      own and delivered), none has tx_id NULL (before 011) or below the floor, and the largest tx_id is
--      below the confirmed mark's snapshot_xmin. Three probes of the (tx_id) WHERE published_at IS NULL
--      index. Then every row's transaction ended before the mark and committed while the slot existed:
--      the slot has decoded it, Kafka has it. DROP TABLE. Otherwise the partition stays ('kept'): a
--      later mark covers it, or (below the floor) outbox:cleanup --below-floor deletes those rows first.
-- At most one partition is dropped per call: the root's lock is held until the call's transaction ends,
-- so each drop is its own short transaction (the caller loops while one comes back dropped, as the
-- DELETE cleanup loops over batches). The refusals are 012's: 'unregistered', 'recreated' (floor and
-- marks forgotten, a new floor), 'statistics-missing'; and nothing is dropped while the slot is missing.
-- A DROP writes no row to the WAL and the publication publishes no delete: nothing reaches Kafka.
CREATE FUNCTION ${outboxPartitionsFunction}(p_slot text, p_width_seconds integer, p_ahead integer, p_lock_timeout_ms integer)
RETURNS TABLE (created integer, dropped integer, kept integer, slot_found boolean, confirmed_flush_lsn pg_lsn, safe_lsn pg_lsn,
               pending_lsn pg_lsn, refused text, lock_timeouts integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_root      oid;
  v_schema    text;
  v_relname   text;
  v_width_ms  bigint;
  v_now_ms    bigint;
  v_lo        bigint;
  v_lo_id     text;
  v_hi_id     text;
  v_part      record;
  v_name      text;
  v_created   integer := 0;
  v_dropped   integer := 0;
  v_kept      integer := 0;
  v_timeouts  integer := 0;
  v_nulls     boolean;
  v_min       bigint;
  v_max       bigint;
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
  v_refused   text;
  v_registered boolean;
BEGIN
  IF p_width_seconds IS NULL OR p_width_seconds < 1 THEN
    RAISE EXCEPTION 'outbox partitions: the window must be at least 1 second, got %', p_width_seconds USING ERRCODE = '22023';
  END IF;
  IF p_ahead IS NULL OR p_ahead < 1 THEN
    RAISE EXCEPTION 'outbox partitions: make at least 1 window ahead, got %', p_ahead USING ERRCODE = '22023';
  END IF;
  IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms < 1 THEN
    RAISE EXCEPTION 'outbox partitions: lock timeout must be at least 1 ms, got %', p_lock_timeout_ms USING ERRCODE = '22023';
  END IF;
  -- The outbox's oid through its row type: no name is ever quoted into a string here.
  SELECT t.typrelid INTO v_root FROM pg_type t WHERE t.oid = pg_typeof(NULL::${outbox});
  SELECT n.nspname, c.relname INTO v_schema, v_relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = v_root AND c.relkind = 'p';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'outbox partitions: % is not a partitioned table', v_root::regclass
      USING ERRCODE = '55000', HINT = 'Set outbox.cleanupMode to partition (OUTBOX_CLEANUP_MODE=partition) and run `outbox db:provision`, or use the DELETE cleanup.';
  END IF;
  PERFORM set_config('lock_timeout', p_lock_timeout_ms::text, true);
  v_width_ms := p_width_seconds::bigint * 1000;
  v_now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;

  -- Partitions ahead: each window not overlapping an existing partition.
  FOR k IN 0..p_ahead LOOP
    v_lo := (v_now_ms / v_width_ms + k) * v_width_ms;
    CONTINUE WHEN EXISTS (SELECT 1 FROM (SELECT c.oid, ('x' || left(replace(m[1], '-', ''), 12))::bit(48)::bigint AS lo_ms, ('x' || left(replace(m[2], '-', ''), 12))::bit(48)::bigint AS hi_ms
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
                  regexp_match(pg_get_expr(c.relpartbound, c.oid), $re$^FOR VALUES FROM \('([0-9a-f-]{36})'\) TO \('([0-9a-f-]{36})'\)$$re$) m
            WHERE i.inhparent = v_root) b WHERE b.lo_ms < v_lo + v_width_ms AND b.hi_ms > v_lo);
    v_name := left(v_relname, 46) || '_p' || to_char(to_timestamp(v_lo / 1000.0) AT TIME ZONE 'UTC', 'YYYYMMDD_HH24MISS');
    -- The smallest uuid of each bound's millisecond: 48 bits of time, then zeros.
    v_lo_id := lpad(to_hex(v_lo), 12, '0');
    v_hi_id := lpad(to_hex(v_lo + v_width_ms), 12, '0');
    BEGIN
      EXECUTE format('CREATE TABLE %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)', v_schema, v_name, v_root::regclass,
                     left(v_lo_id, 8) || '-' || right(v_lo_id, 4) || '-0000-0000-000000000000',
                     left(v_hi_id, 8) || '-' || right(v_hi_id, 4) || '-0000-0000-000000000000');
      v_created := v_created + 1;
    EXCEPTION WHEN lock_not_available THEN
      v_timeouts := v_timeouts + 1;
      EXIT;
    END;
  END LOOP;

  -- The slot's state: 012's function word for word up to its DELETE (see there).
  PERFORM 1 FROM ${outboxCleanupRegistrations} r WHERE r.slot_name = p_slot FOR UPDATE;
  v_registered := FOUND;
  SELECT s.confirmed_flush_lsn, s.restart_lsn INTO v_confirmed, v_restart
    FROM pg_replication_slots s
   WHERE s.slot_name = p_slot AND s.slot_type = 'logical' AND s.database = current_database();
  IF NOT FOUND THEN
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
    DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
    RETURN QUERY SELECT v_created, 0, 0, false, NULL::pg_lsn, NULL::pg_lsn, NULL::pg_lsn,
      CASE WHEN v_registered THEN NULL ELSE 'unregistered' END, v_timeouts;
    RETURN;
  END IF;
  IF NOT v_registered THEN
    RETURN QUERY SELECT v_created, 0, 0, true, v_confirmed, NULL::pg_lsn, NULL::pg_lsn, 'unregistered'::text, v_timeouts;
    RETURN;
  END IF;
  IF v_confirmed IS NULL THEN
    RETURN QUERY SELECT v_created, 0, 0, true, NULL::pg_lsn, NULL::pg_lsn, NULL::pg_lsn, NULL::text, v_timeouts;
    RETURN;
  END IF;
  IF v_has_stats THEN
    SELECT st.total_txns, st.total_bytes, st.stats_reset INTO v_txns, v_bytes, v_reset
      FROM pg_stat_replication_slots st WHERE st.slot_name = p_slot;
    IF NOT FOUND THEN
      DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot;
      DELETE FROM ${outboxCleanupSlots} f WHERE f.slot_name = p_slot;
      RETURN QUERY SELECT v_created, 0, 0, true, v_confirmed, NULL::pg_lsn, NULL::pg_lsn, 'statistics-missing'::text, v_timeouts;
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

  -- The drop (steps 1 to 3 above), oldest window first, at most one.
  IF v_safe.lsn IS NOT NULL THEN
    DELETE FROM ${outboxCleanupMarks} m WHERE m.slot_name = p_slot AND m.lsn < v_safe.lsn;
    FOR v_part IN
      SELECT b.oid, b.lo_ms FROM (SELECT c.oid, ('x' || left(replace(m[1], '-', ''), 12))::bit(48)::bigint AS lo_ms, ('x' || left(replace(m[2], '-', ''), 12))::bit(48)::bigint AS hi_ms
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
                  regexp_match(pg_get_expr(c.relpartbound, c.oid), $re$^FOR VALUES FROM \('([0-9a-f-]{36})'\) TO \('([0-9a-f-]{36})'\)$$re$) m
            WHERE i.inhparent = v_root) b
       WHERE b.hi_ms <= (v_now_ms / v_width_ms - 1) * v_width_ms ORDER BY b.lo_ms
    LOOP
      -- The same checks first without the locks: a partition that already fails them (rows newer than
      -- the mark) is kept without making writers wait. Only a pass is decisive, and only under the locks.
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s o WHERE o.published_at IS NULL AND o.tx_id IS NULL)', v_part.oid::regclass) INTO v_nulls;
      EXECUTE format('SELECT min(o.tx_id), max(o.tx_id) FROM %s o WHERE o.published_at IS NULL', v_part.oid::regclass) INTO v_min, v_max;
      IF v_nulls OR (v_min IS NOT NULL AND (v_min < v_seen.floor_tx_id OR v_max >= v_safe.snapshot_xmin)) THEN
        v_kept := v_kept + 1;
        CONTINUE;
      END IF;
      BEGIN
        EXECUTE format('LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE', v_root::regclass);
        EXECUTE format('LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE', v_part.oid::regclass);
      EXCEPTION WHEN lock_not_available THEN
        v_timeouts := v_timeouts + 1;
        EXIT;
      END;
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s o WHERE o.published_at IS NULL AND o.tx_id IS NULL)', v_part.oid::regclass) INTO v_nulls;
      EXECUTE format('SELECT min(o.tx_id), max(o.tx_id) FROM %s o WHERE o.published_at IS NULL', v_part.oid::regclass) INTO v_min, v_max;
      IF NOT v_nulls AND (v_min IS NULL OR (v_min >= v_seen.floor_tx_id AND v_max < v_safe.snapshot_xmin)) THEN
        EXECUTE format('DROP TABLE %s', v_part.oid::regclass);
        v_dropped := 1;
        EXIT;
      END IF;
      v_kept := v_kept + 1;
    END LOOP;
  END IF;

  UPDATE ${outboxCleanupSlots} f
     SET seen_at = clock_timestamp(), seen_confirmed_lsn = v_confirmed, seen_restart_lsn = v_restart,
         seen_total_txns = v_txns, seen_total_bytes = v_bytes, seen_stats_reset = v_reset,
         safe_xmin = COALESCE(v_safe.snapshot_xmin, f.safe_xmin)
   WHERE f.slot_name = p_slot;
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
  RETURN QUERY SELECT v_created, v_dropped, v_kept, true, v_confirmed, v_safe.lsn, v_pending, v_refused, v_timeouts;
END
$fn$;
REVOKE ALL ON FUNCTION ${outboxPartitionsFunction}(text, integer, integer, integer) FROM PUBLIC;
