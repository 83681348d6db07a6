import type { PoolClient } from 'pg';
import { isOutboxError } from '../errors';
import { isCredentialFailure } from '../errors/credentials';
import { backoffDelay, sleepUnlessAborted } from '../retry';
import { deadLetterAndPark } from './dead-letter';
import { HandlerSpans } from './handler-spans';
import { applyMany, HandlerFailed, InboxUnavailable, type HandlerCall } from './inbox-transaction';
import { ParkedKeysStale, type ParkedKeys } from './parked';
import { count, messageOf, waitForInfrastructure, whereOf, type BatchScope, type Outcome, type Prepared, type Ready, type RouterDeps } from './record-context';

/**
 * The second part of a record's way: the inbox transaction with the handler, and the retry policy.
 * Records of one lane share a transaction (applyChunk); a record alone, a replay, a parked key's
 * record, or the records of a failed chunk go one per transaction (finishRecord), retried.
 */

/** An inbox item: a ready record under its event id. */
interface Item {
  id: string;
  ready: Ready;
}

/**
 * The handler calls for the fresh records, in order: one per record with a per-event handler; one per
 * run of consecutive records whose handlers are the same batch function. With `spans`, each call runs
 * in its span (handler-spans.ts).
 */
export function handlerCalls(fresh: readonly Item[], spans?: HandlerSpans): Array<HandlerCall<Item>> {
  const calls: Array<HandlerCall<Item>> = [];
  const traced = (items: readonly Item[], call: () => Promise<void>) => (spans ? spans.run(items.map((item) => item.ready), call) : call());
  for (let i = 0; i < fresh.length; ) {
    const first = fresh[i] as Item;
    const handler = first.ready.handler;
    if (typeof handler === 'function') {
      calls.push({ items: [first], run: (tx) => traced([first], () => handler(first.ready.event, { tx })) });
      i++;
      continue;
    }
    const { batch } = handler;
    let end = i + 1;
    while (end < fresh.length && batchOf(fresh[end] as Item) === batch) end++;
    const items = fresh.slice(i, end);
    calls.push({ items, run: (tx) => traced(items, () => batch(items.map((item) => item.ready.event), { tx })) });
    i = end;
  }
  return calls;
}

function batchOf(item: Item): unknown {
  const handler = item.ready.handler;
  return typeof handler === 'function' ? undefined : handler.batch;
}

/** Can this record share a transaction with its neighbours? Not when its key is parked or it is a replay. */
export function chunkable(prepared: Prepared, scope: BatchScope): prepared is Ready {
  return prepared.kind === 'ready' && !prepared.replayed && scope.parked?.earliest(prepared.key) === undefined;
}

/**
 * Several ready records in one inbox transaction. Returns undefined when it fails (nothing was
 * committed): the caller then takes them one by one, with retries and dead letters.
 */
export async function applyChunk(chunk: readonly Ready[], deps: RouterDeps, scope: BatchScope): Promise<Outcome[] | undefined> {
  const started = Date.now();
  const spans = new HandlerSpans(deps.consumer);
  let results: Outcome[];
  try {
    results = await applyMany(
      deps.pool,
      deps.inboxTable,
      deps.consumer,
      chunk.map((ready) => ({ id: ready.event.id, ready })),
      // None of its keys (unparked at load) was parked since: checked once, in the closing statement.
      { handlerTimeoutMs: deps.handlerTimeoutMs, calls: (fresh) => handlerCalls(fresh, spans), guard: scope.parked?.guard(chunk.map((c) => c.key)) },
    );
  } catch (error) {
    // Each record is tried again alone, in a span of its own; a handler that threw has its exception on its span.
    spans.end('rolled-back');
    const cause = error instanceof HandlerFailed || error instanceof InboxUnavailable ? error.cause : error;
    deps.emit('router.chunk-split', { topic: chunk[0]?.topic, partition: chunk[0]?.partition, records: chunk.length, error: messageOf(cause) });
    return undefined;
  }
  spans.end('applied');
  const ms = Date.now() - started;
  chunk.forEach((r, i) => count(r, results[i] as 'applied' | 'duplicate', 1, ms, deps));
  return results;
}

/** One prepared record in its own transaction (retried), or its dead letter, its skip, or its block. */
export async function finishRecord(prepared: Prepared, deps: RouterDeps, scope: BatchScope): Promise<Outcome> {
  if (prepared.kind === 'aborted') return 'aborted';
  if (prepared.kind === 'skip') {
    deps.stats.skipped++;
    deps.emit('router.skipped', { ...whereOf(prepared), reason: prepared.reason });
    return 'skipped';
  }
  if (prepared.kind === 'block') {
    // A producer deployed the type before this consumer: hold the partition (order intact, nothing
    // lost) until the router stops or a rebalance hands the partition to a router with the handler.
    deps.emit('router.blocked', { ...whereOf(prepared), id: prepared.eventId, error: prepared.reason });
    try {
      while (await sleepUnlessAborted(deps.backoff.maxDelayMs, scope.signal)) await scope.heartbeat();
    } finally {
      deps.emit('router.unblocked', { ...whereOf(prepared), id: prepared.eventId, aborted: true });
    }
    return 'aborted';
  }
  if (prepared.kind === 'dead-letter') return deadLetterAndPark(prepared, prepared.failure, prepared.eventId, deps, scope);
  for (;;) {
    const outcome = await applyReady(prepared, deps, scope);
    if (outcome !== 'stale') return outcome;
    // Another router parked this key after the batch loaded: decide again on the key's head as it is now.
    for (let wait = 1; ; wait++) {
      try {
        await scope.parked?.reload([prepared.key]);
        break;
      } catch (error) {
        if (!(await waitForInfrastructure(error, wait, whereOf(prepared), deps, scope))) return 'aborted';
      }
    }
  }
}

/** 'stale': the batch's parked keys were out of date (ParkedKeysStale); nothing was committed. */
async function applyReady(prepared: Ready, deps: RouterDeps, scope: BatchScope): Promise<Outcome | 'stale'> {
  const { event, key } = prepared;
  const parked = scope.parked;
  const earliest = parked?.earliest(key);
  const releases = earliest !== undefined && prepared.replayed && earliest === event.id;
  if (earliest !== undefined && !releases) {
    return deadLetterAndPark(
      prepared,
      {
        code: 'KEY_PARKED',
        message: `Key ${JSON.stringify(key)} has an earlier dead-lettered event (${earliest}); later events of the key follow it to the dead-letter topic until it is replayed (outbox dlq:replay --key ${key}) or released (outbox dlq:release).`,
        attempts: 1,
      },
      event.id,
      deps,
      scope,
    );
  }
  let nextHead: Awaited<ReturnType<ParkedKeys['releaseIn']>>;
  const afterInbox =
    parked && releases
      ? async (tx: PoolClient) => {
          nextHead = await parked.releaseIn(tx, key, event.id);
        }
      : undefined;

  let attempt = 1;
  let blocked = false;
  for (let wait = 1; ; ) {
    const spans = new HandlerSpans(deps.consumer, attempt);
    try {
      const started = Date.now();
      const [result] = await applyMany(deps.pool, deps.inboxTable, deps.consumer, [{ id: event.id, ready: prepared }], {
        handlerTimeoutMs: deps.handlerTimeoutMs,
        calls: (fresh) => handlerCalls(fresh, spans),
        afterInbox,
        guard: releases ? undefined : parked?.guard([key]),
      });
      spans.end('applied');
      if (releases) parked?.released(key, nextHead);
      if (blocked) deps.emit('router.unblocked', { ...whereOf(prepared), id: event.id, attempts: attempt });
      count(prepared, result as 'applied' | 'duplicate', attempt, Date.now() - started, deps);
      return result as 'applied' | 'duplicate';
    } catch (error) {
      if (error instanceof InboxUnavailable) {
        // Not the record's fault: the same try again (stale: decided again on the key's head).
        spans.end(error.cause instanceof ParkedKeysStale ? 'rolled-back' : 'retry', error.cause instanceof ParkedKeysStale ? undefined : error.cause);
        if (error.cause instanceof ParkedKeysStale) return 'stale';
        if (!(await waitForInfrastructure(error.cause, wait++, whereOf(prepared), deps, scope))) return 'aborted';
        continue;
      }
      const cause = error instanceof HandlerFailed ? error.cause : error;
      if (isCredentialFailure(cause)) {
        // A refused credential, ACL or certificate (the handler used the toolkit's clients): the
        // infrastructure's fault, not the record's. Waited out like the database; no attempt counted.
        spans.end('retry', cause);
        if (!(await waitForInfrastructure(cause, wait++, whereOf(prepared), deps, scope))) return 'aborted';
        continue;
      }
      // A handler may say "this will never work" with a non-retriable OutboxError: no point retrying.
      const hopeless = isOutboxError(cause) && !cause.retriable;
      const policy = deps.policyFor?.(prepared.aggregateType) ?? 'dead-letter';
      if ((hopeless || attempt >= deps.maxAttempts) && policy === 'dead-letter') {
        // The try's span stays open until the dead letter is written: its outcome is the record's.
        return deadLetterAndPark(prepared, { code: isOutboxError(cause) ? cause.code : 'HANDLER_FAILED', message: messageOf(cause), attempts: attempt }, event.id, deps, scope, spans, cause);
      }
      spans.end('retry', cause);
      if ((hopeless || attempt >= deps.maxAttempts) && !blocked) {
        // `block`: the partition waits on this record, retrying at the backoff ceiling, so order holds strictly.
        blocked = true;
        deps.emit('router.blocked', { ...whereOf(prepared), id: event.id, attempts: attempt, error: messageOf(cause) });
      }
      const delay = backoffDelay(attempt, deps.backoff, deps.random);
      deps.stats.retries++;
      deps.emit('router.retry', { ...whereOf(prepared), id: event.id, attempt, delayMs: delay, error: messageOf(cause) });
      if (!(await sleepUnlessAborted(delay, scope.signal))) {
        if (blocked) deps.emit('router.unblocked', { ...whereOf(prepared), id: event.id, attempts: attempt, aborted: true });
        return 'aborted';
      }
      await scope.heartbeat();
      attempt++;
    }
  }
}
