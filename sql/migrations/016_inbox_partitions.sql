-- A partitioned inbox that is pruned by dropping whole partitions instead of deleting rows
-- (docs/inbox-partitions.md). This migration only prepares: nothing changes for an inbox that stays one
-- table (router.inboxPartitionIntervalMs 0, the default). `outbox inbox:partition` converts it.
--
-- The partition key. Range partitions on message_id's text are not exact: a non-UUIDv7 id (a UUIDv4 of an
-- adopted outbox, a bigint as text) whose text sorts inside a time range would land in a time partition
-- and be dropped with it, and its redelivery would be applied twice. So the key is a column, message_ms,
-- that is a FUNCTION of message_id (<inbox>_message_ms): the UUIDv7's millisecond timestamp (its first 48
-- bits), or 0 for any other id. The primary key becomes (consumer, message_id, message_ms); since
-- message_ms follows from message_id, it is unique exactly when (consumer, message_id) is, and both
-- copies of a redelivered event land in the same partition, where the key finds the first.
-- PostgreSQL refuses generated columns in a partition key and a BEFORE ROW trigger cannot move a row to
-- another partition, so the router's INSERT computes it with this function; the CHECK below makes any
-- other value an error (an older router, which leaves the default 0, is refused rather than silently
-- breaking the dedup).
--
-- Until conversion the function returns 0 for every id: every existing row (default 0) satisfies it,
-- so the CHECK is added NOT VALID (no scan, no rewrite; the column's constant default is metadata only)
-- and holds for every new row. Conversion replaces the function with one that returns the timestamp
-- for UUIDv7 ids at or after a cutover time it chooses in the future, and then validates the CHECK.
ALTER TABLE ${inbox} ADD COLUMN message_ms bigint NOT NULL DEFAULT 0;
CREATE FUNCTION ${inboxMessageMs}(p_id text) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$ SELECT 0::bigint $fn$;
ALTER TABLE ${inbox} ADD CONSTRAINT ${inboxKeyCheck} CHECK (message_ms = ${inboxMessageMs}(message_id)) NOT VALID;

-- Adds the time partition that holds p_ms when none does: aligned to p_width_ms since the epoch (NULL:
-- the width of the newest time partition), clipped to its neighbours. The router calls it ahead of time
-- and, for an event whose partition is missing (older than the oldest one kept, newer than the newest
-- made), on demand. SECURITY DEFINER: the router's role has no DDL right on the inbox; it may run this
-- (sql/roles.sql), which can only add an empty partition. CREATE TABLE … PARTITION OF would lock the
-- parent ACCESS EXCLUSIVE; a table made LIKE it and then ATTACHed takes SHARE UPDATE EXCLUSIVE, which
-- inserts do not wait for. An advisory lock on the parent serialises two routers adding at once.
CREATE FUNCTION ${inboxPartitionAdd}(p_ms bigint, p_width_ms bigint DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  parent regclass := to_regclass(${inboxLiteral});
  nsp text;
  base text;
  width bigint := p_width_ms;
  v_lo bigint;
  v_hi bigint;
  name text;
BEGIN
  IF parent IS NULL OR (SELECT relkind FROM pg_class WHERE oid = parent) <> 'p' THEN
    RAISE EXCEPTION 'the inbox % is not partitioned: run outbox inbox:partition first', ${inboxLiteral} USING ERRCODE = '55000';
  END IF;
  IF p_ms < 1 THEN RETURN NULL; END IF;
  PERFORM pg_advisory_xact_lock(parent::oid::bigint);
  CREATE TEMP TABLE IF NOT EXISTS pg_temp.inbox_bounds (lo bigint, hi bigint) ON COMMIT DROP;
  DELETE FROM pg_temp.inbox_bounds;
  INSERT INTO pg_temp.inbox_bounds
    SELECT substring(b FROM 'FROM \(''(-?\d+)''\)')::bigint, substring(b FROM 'TO \(''(-?\d+)''\)')::bigint
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid, pg_get_expr(c.relpartbound, c.oid) AS b
    WHERE i.inhparent = parent;
  IF EXISTS (SELECT 1 FROM pg_temp.inbox_bounds b WHERE coalesce(b.lo <= p_ms, true) AND p_ms < b.hi) THEN RETURN NULL; END IF;
  IF width IS NULL THEN
    SELECT b.hi - b.lo INTO width FROM pg_temp.inbox_bounds b WHERE b.lo IS NOT NULL ORDER BY b.lo DESC LIMIT 1;
  END IF;
  IF width IS NULL OR width < 1 THEN
    RAISE EXCEPTION 'no partition width for the inbox %: pass one (router.inboxPartitionIntervalMs)', ${inboxLiteral} USING ERRCODE = '22023';
  END IF;
  v_lo := p_ms - p_ms % width;
  v_hi := v_lo + width;
  v_lo := greatest(v_lo, (SELECT max(b.hi) FROM pg_temp.inbox_bounds b WHERE b.hi <= p_ms));
  v_hi := least(v_hi, (SELECT min(b.lo) FROM pg_temp.inbox_bounds b WHERE b.lo > p_ms));
  SELECT n.nspname, c.relname INTO nsp, base FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = parent;
  name := left(base, 40) || '_p' || to_char(to_timestamp(v_lo / 1000.0) AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
  EXECUTE format('CREATE TABLE %I.%I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', nsp, name, parent);
  EXECUTE format('ALTER TABLE %s ATTACH PARTITION %I.%I FOR VALUES FROM (%s) TO (%s)', parent, nsp, name, v_lo, v_hi);
  RETURN name;
END
$fn$;

-- Drops one time partition of the inbox for consumer p_consumer, or says why not:
--   too-new          its range does not end before p_before (now - router.inboxRetentionMs);
--   other-consumers  it holds rows of another consumer, whose router has its own window (one inbox table
--                    per consumer lets every partition drop; a shared one falls back to the DELETE prune);
--   processed-late   a row of ours was processed at or after p_before: an event that reached the router
--                    late (a stopped connector, a backlog) may still be on its topic, whatever its id's time;
--   parked           a row of ours belongs to an event still parked for the consumer: its replay is a
--                    duplicate only while that row exists (migration 010). The partition is KEPT, not
--                    emptied into the catch-all: moving a row would change its message_ms, and the key
--                    must stay a function of message_id or a redelivery would not find it. The router's
--                    DELETE prune then removes the rest of that partition's rows of ours, as it always has;
--   lock-timeout     a lock was not granted within p_lock_timeout_ms (a long transaction on the inbox):
--                    given up, so inserts queue behind it at most that long; the next run tries again.
-- The checks run under the partition's ACCESS EXCLUSIVE lock, so no row can arrive between them and the
-- DROP (which also takes the parent's ACCESS EXCLUSIVE lock, held until the commit just after it).
-- Returns the rows dropped, the lock wait, how long the partition was held (checks, count, DROP) and the DROP alone.
-- Not DETACH … CONCURRENTLY: it cannot run inside a function (a transaction), and the router's role may
-- run only this function; the locks here are held for milliseconds (docs/inbox-partitions.md measures them).
CREATE FUNCTION ${inboxPartitionDrop}(p_name text, p_consumer text, p_before timestamptz, p_lock_timeout_ms integer)
RETURNS TABLE (outcome text, rows_dropped bigint, lock_wait_ms float8, held_ms float8, drop_ms float8)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  parent regclass := to_regclass(${inboxLiteral});
  part regclass;
  v_hi bigint;
  t0 timestamptz;
  t1 timestamptz;
  t2 timestamptz;
  n bigint;
  found boolean;
BEGIN
  SELECT c.oid, substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''(-?\d+)''\)')::bigint INTO part, v_hi
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
  WHERE i.inhparent = parent AND c.relname = p_name AND pg_get_expr(c.relpartbound, c.oid) NOT LIKE '%MINVALUE%';
  IF part IS NULL THEN RETURN QUERY SELECT 'not-found'::text, 0::bigint, 0::float8, 0::float8, 0::float8; RETURN; END IF;
  IF v_hi > floor(extract(epoch FROM p_before) * 1000) THEN RETURN QUERY SELECT 'too-new'::text, 0::bigint, 0::float8, 0::float8, 0::float8; RETURN; END IF;
  PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
  t0 := clock_timestamp();
  BEGIN
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', part);
    t1 := clock_timestamp();
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE consumer < $1) OR EXISTS (SELECT 1 FROM %s WHERE consumer > $1)', part, part) INTO found USING p_consumer;
    IF found THEN RETURN QUERY SELECT 'other-consumers'::text, 0::bigint, (extract(epoch FROM t1 - t0) * 1000)::float8, (extract(epoch FROM clock_timestamp() - t1) * 1000)::float8, 0::float8; RETURN; END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE consumer = $1 AND processed_at >= $2)', part) INTO found USING p_consumer, p_before;
    IF found THEN RETURN QUERY SELECT 'processed-late'::text, 0::bigint, (extract(epoch FROM t1 - t0) * 1000)::float8, (extract(epoch FROM clock_timestamp() - t1) * 1000)::float8, 0::float8; RETURN; END IF;
    EXECUTE format(
      'SELECT EXISTS (SELECT 1 FROM %s p JOIN %s i ON i.consumer = p.consumer AND i.message_id = p.event_id WHERE p.consumer = $1) ' ||
      'OR EXISTS (SELECT 1 FROM %s p JOIN %s i ON i.consumer = p.consumer AND i.message_id = lower(p.event_id) WHERE p.consumer = $1)',
      ${parkedLiteral}, part, ${parkedLiteral}, part) INTO found USING p_consumer;
    IF found THEN RETURN QUERY SELECT 'parked'::text, 0::bigint, (extract(epoch FROM t1 - t0) * 1000)::float8, (extract(epoch FROM clock_timestamp() - t1) * 1000)::float8, 0::float8; RETURN; END IF;
    -- Counted under the partition's lock (which only inserts into this partition wait for: events past
    -- the window); the parent's lock is taken by the DROP alone.
    EXECUTE format('SELECT count(*) FROM %s', part) INTO n;
    t2 := clock_timestamp();
    EXECUTE format('DROP TABLE %s', part);
  EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
    RETURN QUERY SELECT 'lock-timeout'::text, 0::bigint, (extract(epoch FROM clock_timestamp() - t0) * 1000)::float8, 0::float8, 0::float8;
    RETURN;
  END;
  RETURN QUERY SELECT 'dropped'::text, n, (extract(epoch FROM t1 - t0) * 1000)::float8, (extract(epoch FROM clock_timestamp() - t1) * 1000)::float8, (extract(epoch FROM clock_timestamp() - t2) * 1000)::float8;
END
$fn$;
REVOKE ALL ON FUNCTION ${inboxPartitionAdd}(bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION ${inboxPartitionDrop}(text, text, timestamptz, integer) FROM PUBLIC;
