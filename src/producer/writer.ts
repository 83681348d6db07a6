import { createHash } from 'node:crypto';
import type { ClientBase, QueryConfig, QueryResultRow } from 'pg';
import type { EventMapShape } from '../codec/generate-types';
import type { OutboxConfig } from '../config';
import { pgCode, qualified } from '../db';
import { OUTBOX_COLUMNS, SCHEMA_VERSION_HEADER } from '../envelope';
import { OutboxError } from '../errors';
import { activeTraceparent } from '../tracing';
import { validateEvent, type ContentType, type OutboxEvent, type WriterEvent } from './event';
import { assertExecutorInTransaction, type OutboxExecutor } from './executor';
import { OUTBOX_LIMIT_CONSTRAINTS, explainLimitViolation } from './limits';
import { uuidv7 } from './uuidv7';

/** Version 7, variant 10 (RFC 9562), in the canonical text form. */
const UUIDV7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** What the writer needs from a codec: payload → bytes, validating against the event's schema. */
export interface PayloadEncoder {
  encode(aggregateType: string, eventType: string, payload: unknown, contentType: ContentType): Promise<Buffer>;
}

export interface OutboxWriterOptions {
  outbox: OutboxConfig['outbox'];
  codec: PayloadEncoder;
  /** Default for events that do not say; Avro through the schema registry unless set. */
  contentType?: ContentType;
  /**
   * Insert and delete in the same transaction: the WAL still carries the insert (CDC publishes it),
   * the table stays empty, no cleanup job is needed. Only with CDC: the polling relay needs the rows.
   */
  deleteAfterInsert?: boolean;
  /**
   * 'active' (default): an event without a `traceparent` gets the one of the OpenTelemetry span active
   * where it is written, so the router's handler span continues the writing request's trace
   * (docs/tracing.md). 'off': only a hand-passed `traceparent` is stored. Without a registered
   * OpenTelemetry SDK no span is ever active, and 'active' stores nothing either.
   */
  traceContext?: 'active' | 'off';
}

export interface WrittenEvent {
  id: string;
  aggregateType: string;
  aggregateId: string;
  type: string;
  contentType: ContentType;
  bytes: number;
}

/** An outbox INSERT, validated and encoded, for the caller to put inside its own statement. */
export interface PreparedInsert {
  /** `INSERT INTO "schema"."outbox" (…) VALUES ($n, …)`, numbered from `firstParam`. */
  text: string;
  values: unknown[];
  events: WrittenEvent[];
}

/** E: the events it takes; `OutboxWriter<OutboxEventOf<EventMap>>` from `createOutboxWriter<EventMap>` (docs/library.md, "Typed events"). */
export interface OutboxWriter<E extends OutboxEvent = OutboxEvent> {
  /** Adds one event to the caller's open transaction. Never BEGINs or COMMITs. */
  writeEvent(client: ClientBase, event: E): Promise<WrittenEvent>;
  /** Adds several events in one statement; all or nothing. */
  writeEvents(client: ClientBase, events: readonly E[]): Promise<WrittenEvent[]>;
  /**
   * writeEvents through another library's transaction handle (./executor.ts): the adapters of
   * `outbox-router/kysely`, `/drizzle`, `/knex`, … call it. It checks the handle is inside a transaction
   * before encoding and again before the INSERT, and refuses otherwise: nothing is written.
   */
  writeEventsVia(executor: OutboxExecutor, events: readonly E[]): Promise<WrittenEvent[]>;
  /**
   * The outbox INSERT as SQL text and parameters, for ONE statement that also does the business write:
   *   WITH o AS (INSERT INTO orders … VALUES ($1, $2)) <text>     -- values: [...orderParams, ...values]
   * A single statement is atomic on its own, and it saves the extra round trip that makes a separate
   * outbox INSERT cost 25–30% of a one-row business transaction. Not with deleteAfterInsert (a DELETE
   * in the same statement cannot see the row).
   */
  prepareInsert(events: readonly E[], options?: { firstParam?: number }): Promise<PreparedInsert>;
  /**
   * The recommended fast path: the business INSERT/UPDATE/DELETE and the outbox INSERT sent as ONE
   * statement, `WITH biz AS (<business>) INSERT INTO outbox …`, with the business parameters first. One
   * statement is atomic on its own, so `db` may be a pool (autocommit: one round trip in all) or a client
   * inside the caller's transaction. The statement is prepared once per connection (a named statement
   * per business text and event count), so PostgreSQL parses and plans it once. With
   * `returning: true` the business statement must have a RETURNING clause: its rows are returned, and the
   * outbox rows are inserted after it (their `seq` follows its row locks, which the polling relay's order
   * needs when it UPDATEs an existing aggregate). Not with deleteAfterInsert.
   */
  writeWith<R extends QueryResultRow = QueryResultRow>(
    db: Queryable,
    business: { text: string; values?: readonly unknown[] },
    events: readonly E[],
    options?: { returning?: boolean },
  ): Promise<{ rows: R[]; events: WrittenEvent[] }>;
}

/** A pool, a pool client or a client: whatever runs one statement. */
export interface Queryable {
  query(config: QueryConfig<unknown[]>): Promise<{ rows: QueryResultRow[] }>;
}

/** The event columns (src/envelope), in the order of each row's parameters below. */
const COLUMN_LIST = OUTBOX_COLUMNS.join(', ');
const COLUMNS = OUTBOX_COLUMNS.length;
const ROWS_PER_STATEMENT = 1000;
/** Distinct statement shapes a writer remembers (and prepares) at most. */
const STATEMENT_CACHE_MAX = 256;

/** M: a generated EventMap to type the events (docs/library.md, "Typed events"); by default any event. */
export function createOutboxWriter<M extends EventMapShape = EventMapShape>(options: OutboxWriterOptions): OutboxWriter<WriterEvent<M>> {
  const table = qualified(options.outbox.schema, options.outbox.table);
  const defaultType: ContentType = options.contentType ?? 'application/vnd.apache.avro+binary';
  const limit = options.outbox.maxPayloadBytes;
  if (options.traceContext !== undefined && options.traceContext !== 'active' && options.traceContext !== 'off') {
    throw new OutboxError('CONFIG_INVALID', `createOutboxWriter's traceContext must be 'active' or 'off', got ${JSON.stringify(options.traceContext)}.`);
  }
  const traceActive = options.traceContext !== 'off';
  const partitioned = options.outbox.cleanupMode === 'partition';

  async function prepare(event: OutboxEvent, index?: number) {
    validateEvent(event, index);
    const contentType = event.contentType ?? defaultType;
    const payload = await options.codec.encode(event.aggregateType, event.type, event.payload, contentType);
    if (payload.length > limit) {
      throw new OutboxError(
        'PAYLOAD_TOO_LARGE',
        `The ${event.type} payload of ${event.aggregateType} ${event.aggregateId} is ${payload.length} bytes encoded; the limit is ${limit} ` +
          '(outbox.maxPayloadBytes / OUTBOX_MAX_PAYLOAD_BYTES, kept under Kafka\'s 1 MiB record limit). Nothing was written. ' +
          'Store large content elsewhere and put a reference in the event (claim check).',
        { details: { bytes: payload.length, limit } },
      );
    }
    if (event.id !== undefined && partitioned && !UUIDV7.test(event.id)) {
      throw new OutboxError(
        'EVENT_INVALID',
        `Event id ${JSON.stringify(event.id)} is not a UUIDv7, and the outbox is partitioned by the time in its id (outbox.cleanupMode 'partition'). ` +
          'Leave id unset (the writer makes a UUIDv7 of now) or pass a UUIDv7 of about now. Nothing was written.',
      );
    }
    const id = event.id ?? uuidv7();
    const traceparent = event.traceparent ?? (traceActive ? activeTraceparent() : undefined) ?? null;
    const row = [id, event.aggregateType, event.aggregateId, event.type, payload, contentType, traceparent, headersColumn(event)];
    const written: WrittenEvent = { id, aggregateType: event.aggregateType, aggregateId: event.aggregateId, type: event.type, contentType, bytes: payload.length };
    return { row, written };
  }

  // Statement texts by shape, built once: a writer loop sends the same few shapes over and over.
  const insertTexts = new Map<string, string>();
  function insertText(rowCount: number, firstParam: number): string {
    const key = `${rowCount}:${firstParam}`;
    let text = insertTexts.get(key);
    if (text === undefined) {
      const values = Array.from({ length: rowCount }, (_, r) => `(${Array.from({ length: COLUMNS }, (__, c) => `$${firstParam + r * COLUMNS + c}`).join(', ')})`);
      text = `INSERT INTO ${table} (${COLUMN_LIST}) VALUES ${values.join(', ')}`;
      if (insertTexts.size < STATEMENT_CACHE_MAX) insertTexts.set(key, text);
    }
    return text;
  }

  /**
   * The outbox INSERT reading `biz` (the RETURNING business statement) first, so the business statement
   * takes its row locks before the events get their `seq`: the relay's per-aggregate order then holds for
   * an UPDATE of an existing aggregate too (docs/relay.md). The parameters are cast, as VALUES in a
   * subquery does not take the target columns' types.
   */
  function insertAfter(rowCount: number, firstParam: number): string {
    const casts = ['uuid', 'text', 'text', 'text', 'bytea', 'text', 'text', 'text'];
    const values = Array.from({ length: rowCount }, (_, r) => `(${casts.map((cast, c) => `$${firstParam + r * COLUMNS + c}::${cast}`).join(', ')})`);
    return `INSERT INTO ${table} (${COLUMN_LIST}) SELECT v.* FROM (VALUES ${values.join(', ')}) AS v CROSS JOIN (SELECT count(*) FROM biz) AS after_biz`;
  }

  const combined = new Map<string, { name: string | undefined; text: string }>();
  /** The one-statement text of a business statement with `rowCount` events, named while the cache has room. */
  function combinedStatement(business: string, paramCount: number, rowCount: number, returning: boolean) {
    const key = `${returning ? 'r' : 'n'}${rowCount}:${paramCount}:${business}`;
    let statement = combined.get(key);
    if (!statement) {
      const text = returning
        ? `WITH biz AS (${business}), outbox_rows AS (${insertAfter(rowCount, paramCount + 1)}) SELECT * FROM biz`
        : `WITH biz AS (${business}) ${insertText(rowCount, paramCount + 1)}`;
      // Named: node-postgres parses it once per connection. Past the cap (business texts built on the fly)
      // statements go unnamed, so a connection never accumulates prepared statements without bound.
      const named = combined.size < STATEMENT_CACHE_MAX;
      statement = { name: named ? `outbox-${createHash('sha1').update(text).digest('hex').slice(0, 20)}` : undefined, text };
      if (named) combined.set(key, statement);
    }
    return statement;
  }

  async function prepareAll(events: readonly OutboxEvent[]) {
    // Validate and encode everything before any SQL: a bad event writes nothing.
    const prepared = [];
    for (const [index, event] of events.entries()) prepared.push(await prepare(event, events.length > 1 ? index : undefined));
    return prepared;
  }

  async function insert(run: (text: string, values: unknown[]) => Promise<unknown>, rows: unknown[][]): Promise<void> {
    for (let start = 0; start < rows.length; start += ROWS_PER_STATEMENT) {
      const chunk = rows.slice(start, start + ROWS_PER_STATEMENT);
      await run(insertText(chunk.length, 1), chunk.flat()).catch((error: unknown) => {
        throw limitViolation(error, limit) ?? error;
      });
      if (options.deleteAfterInsert) {
        await run(`DELETE FROM ${table} WHERE id = ANY($1::uuid[])`, [chunk.map((row) => row[0])]);
      }
    }
  }

  async function writeEvents(client: ClientBase, events: readonly OutboxEvent[]): Promise<WrittenEvent[]> {
    assertInTransaction(client);
    if (events.length === 0) return [];
    const prepared = await prepareAll(events);
    assertInTransaction(client);
    await insert((text, values) => client.query(text, values), prepared.map((p) => p.row));
    return prepared.map((p) => p.written);
  }

  async function writeEventsVia(executor: OutboxExecutor, events: readonly OutboxEvent[]): Promise<WrittenEvent[]> {
    await assertExecutorInTransaction(executor);
    if (events.length === 0) return [];
    const prepared = await prepareAll(events);
    // Encoding may have waited on the registry: the transaction may have ended meanwhile.
    await assertExecutorInTransaction(executor);
    await insert((text, values) => executor.query(text, values), prepared.map((p) => p.row));
    return prepared.map((p) => p.written);
  }

  function assertOneStatement(what: string, events: readonly OutboxEvent[]): void {
    if (options.deleteAfterInsert) {
      throw new OutboxError('WRITER_MODE_CONFLICT', `${what} cannot be used with deleteAfterInsert: a DELETE in the same statement does not see the inserted row. Use writeEvent, or a writer without deleteAfterInsert.`);
    }
    if (events.length === 0 || events.length > ROWS_PER_STATEMENT) {
      throw new OutboxError('EVENT_INVALID', `${what} takes 1 to ${ROWS_PER_STATEMENT} events, got ${events.length}.`);
    }
  }

  async function writeWith<R extends QueryResultRow>(
    db: Queryable,
    business: { text: string; values?: readonly unknown[] },
    events: readonly OutboxEvent[],
    { returning = false }: { returning?: boolean } = {},
  ): Promise<{ rows: R[]; events: WrittenEvent[] }> {
    assertOneStatement('writeWith', events);
    if (typeof business?.text !== 'string' || business.text.trim() === '') {
      throw new OutboxError('EVENT_INVALID', 'writeWith needs the business statement as { text, values }: an INSERT, UPDATE or DELETE with $1… placeholders.');
    }
    const businessValues = business.values ?? [];
    const prepared = await prepareAll(events);
    const statement = combinedStatement(business.text, businessValues.length, prepared.length, returning);
    const values = [...businessValues];
    for (const p of prepared) for (const v of p.row) values.push(v);
    const result = await db.query({ name: statement.name, text: statement.text, values }).catch((error: unknown) => {
      throw limitViolation(error, limit) ?? error;
    });
    return { rows: returning ? (result.rows as R[]) : [], events: prepared.map((p) => p.written) };
  }

  async function prepareInsert(events: readonly OutboxEvent[], { firstParam = 1 }: { firstParam?: number } = {}): Promise<PreparedInsert> {
    assertOneStatement('prepareInsert', events);
    if (!Number.isInteger(firstParam) || firstParam < 1) {
      throw new OutboxError('EVENT_INVALID', `prepareInsert's firstParam must be a positive integer (the number of the first $n placeholder), got ${firstParam}.`);
    }
    const prepared = await prepareAll(events);
    return { text: insertText(prepared.length, firstParam), values: prepared.flatMap((p) => p.row), events: prepared.map((p) => p.written) };
  }

  const writer: OutboxWriter = {
    writeEvents,
    writeEventsVia,
    prepareInsert,
    writeWith,
    async writeEvent(client, event) {
      const [written] = await writeEvents(client, [event]);
      return written as WrittenEvent;
    },
  };
  // Only the accepted events' static type narrows; every event is still validated at run time.
  return writer as OutboxWriter<WriterEvent<M>>;
}

/**
 * The database refused a row by one of the outbox's limit constraints. The writer checks the same limits
 * first, so this means the database was provisioned with other settings (a smaller outbox.maxPayloadBytes).
 */
function limitViolation(error: unknown, maxPayloadBytes: number): OutboxError | undefined {
  const constraint = (error as { constraint?: string }).constraint;
  const rule = pgCode(error) === '23514' ? explainLimitViolation(constraint, maxPayloadBytes) : undefined;
  if (!rule) return undefined;
  return new OutboxError(
    constraint === OUTBOX_LIMIT_CONSTRAINTS.payload ? 'PAYLOAD_TOO_LARGE' : 'EVENT_INVALID',
    `The database refused the outbox row by its check constraint ${constraint}: ${rule}. The writer allows up to ${maxPayloadBytes} payload bytes, ` +
      'so the database was provisioned with different settings: run db:provision with the same outbox.maxPayloadBytes (OUTBOX_MAX_PAYLOAD_BYTES) as the writer. ' +
      'Nothing was written; the transaction is aborted and must be rolled back.',
    { cause: error, details: { constraint, sqlState: '23514' } },
  );
}

/**
 * Outside a transaction the INSERT would autocommit on its own and the event would be published even
 * if the business write later failed: the dual write the outbox exists to prevent.
 */
function assertInTransaction(client: ClientBase): void {
  const probe = (client as { getTransactionStatus?: () => string | null }).getTransactionStatus;
  if (typeof probe !== 'function') {
    throw new OutboxError(
      'NOT_IN_TRANSACTION',
      'writeEvent needs a node-postgres client (pg.Client or a pool client, pg >= 8.11) so it can check that a transaction is open; ' +
        'this client has no getTransactionStatus().',
    );
  }
  const status = probe.call(client);
  if (status === 'T') return;
  throw new OutboxError(
    'NOT_IN_TRANSACTION',
    status === 'E'
      ? 'writeEvent was called on a transaction that already failed: ROLLBACK it and retry the whole unit of work.'
      : 'writeEvent must run inside the caller\'s transaction, so the event commits or rolls back with the business rows: call BEGIN on this client first.',
  );
}

/** The `headers` column: the event's headers, plus `schemaVersion` when the event names one. */
function headersColumn(event: OutboxEvent): string | null {
  const headers = event.schemaVersion === undefined ? event.headers : { ...event.headers, [SCHEMA_VERSION_HEADER]: String(event.schemaVersion) };
  return headers ? JSON.stringify(headers) : null;
}
