import type { KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { DLQ_HEADER, HEADER, headerText } from '../envelope';
import { sleep } from '../retry';
import { REDUCED_HEADER } from './dead-letter';
import { ParkedKeys } from './parked';

/** How often a following replay sends again one event that reached the router before its key's head. */
export const MAX_EARLY_RESENDS = 5;

/** The parked table a replay in outstanding mode reads (ReplayOptions.outstanding). */
export interface OutstandingScope {
  pool: Pool;
  parkedTable: string;
  consumer: string;
  aggregateType: string;
}

/**
 * Why a replay left a key parked:
 * - `failed-again`: one of this replay's events came back to the dead-letter topic (`eventId`, `errorCode`);
 * - `new-failure`: a new dead letter of the key that is not a KEY_PARKED one (a new failure of the key);
 * - `not-replayable`: a dead letter of the key was kept without its value (x-dead-letter-reduced);
 * - `follow-timeout`: `followMs` ran out while the router was still applying the key's events.
 */
export type StillParkedReason = 'failed-again' | 'new-failure' | 'not-replayable' | 'follow-timeout';

export interface StillParked {
  key: string;
  reason: StillParkedReason;
  /** The dead letter that made the replay give up on the key (not for follow-timeout). */
  eventId?: string;
  errorCode?: string;
  /** The key's earliest parked event and its parked rows, read when the replay returned. */
  head?: string;
  parkedRows: number;
}

/**
 * With `outstanding`: the keys a replay replayed, followed past the dead-letter topic's end until each
 * is released. The router parks an event of a key that arrives while the key's replayed events are on
 * their way (behind them, to keep the key's order): its dead letter (KEY_PARKED) comes after the end
 * the replay read to, so the replay re-publishes it too, and the key is released once the router
 * catches up. A key is given up on (left parked, reported) when one of this replay's events comes back
 * to the DLQ (it failed again), a new failure of the key is dead-lettered, or a letter of it cannot be
 * replayed.
 */
export class Follow {
  private readonly chased = new Set<string>();
  private readonly given = new Map<string, Pick<StillParked, 'reason' | 'eventId' | 'errorCode'>>();
  private readonly resends = new Map<string, number>();
  /** Per key: this replay's events that came back before their key's head, by lower-case id, waiting to be sent again. */
  private readonly waiting = new Map<string, Map<string, () => Promise<void>>>();

  constructor(private readonly o: OutstandingScope) {}

  chase(key: string): void {
    if (!this.given.has(key)) this.chased.add(key);
  }

  /** The first reason a key was given up on is the one reported. */
  giveUp(key: string, reason: StillParkedReason, letter: KafkaMessage): void {
    this.chased.delete(key);
    this.waiting.delete(key);
    if (!this.given.has(key)) this.given.set(key, { reason, eventId: headerText(letter.headers, HEADER.id), errorCode: headerText(letter.headers, DLQ_HEADER.errorCode) });
  }

  /** A dead letter not among the outstanding ids read at the start: replayed when it is a parked event of a followed key. */
  async tail(id: string, key: string, message: KafkaMessage, seen: () => boolean, replay: () => Promise<void>): Promise<void> {
    if (!this.chased.has(key)) return;
    if (seen()) return this.giveUp(key, 'failed-again', message);
    if (headerText(message.headers, REDUCED_HEADER) !== undefined) return this.giveUp(key, 'not-replayable', message);
    if (headerText(message.headers, DLQ_HEADER.errorCode) !== 'KEY_PARKED') return this.giveUp(key, 'new-failure', message);
    // The router writes the dead letter, then the parked row: wait a moment for the row.
    for (let i = 0; i < 40; i++) {
      if (await this.parked(key, id)) return replay();
      await sleep(50);
    }
  }

  /**
   * One of this replay's events came back. If only because it reached the router before its key's head
   * (KEY_PARKED) and it was sent again fewer than MAX_EARLY_RESENDS times, it waits (true) until it is
   * the key's head, and `done()` sends it then (`resend`), behind the events before it. False: it failed
   * again.
   */
  early(id: string, key: string, resend: () => Promise<void>, letter: KafkaMessage): boolean {
    if (!this.chased.has(key) || headerText(letter.headers, DLQ_HEADER.errorCode) !== 'KEY_PARKED') return false;
    const n = this.resends.get(id) ?? 0;
    if (n >= MAX_EARLY_RESENDS) return false;
    this.resends.set(id, n + 1);
    const waiting = this.waiting.get(key) ?? new Map<string, () => Promise<void>>();
    waiting.set(id.toLowerCase(), resend);
    this.waiting.set(key, waiting);
    return true;
  }

  /** Sends the waiting events that are their key's head now, drops the released keys; true when no followed key is left. */
  async done(): Promise<boolean> {
    if (this.chased.size === 0) return true;
    const heads = await this.heads([...this.chased]);
    for (const key of [...this.chased]) {
      const head = heads.get(key);
      if (head === undefined) {
        this.chased.delete(key);
        this.waiting.delete(key);
        continue;
      }
      const resend = this.waiting.get(key)?.get(head);
      if (resend) {
        this.waiting.get(key)?.delete(head);
        await resend();
      }
    }
    return this.chased.size === 0;
  }

  /** Each key's earliest parked event (lower case), for the keys that have one: the router's own head query. */
  private async heads(keys: string[]): Promise<Map<string, string>> {
    const { rows } = await this.o.pool.query<{ aggregate_id: string; event_id: string }>(ParkedKeys.headsQuery(this.o.parkedTable), [this.o.consumer, this.o.aggregateType, keys]);
    return new Map(rows.map((r) => [r.aggregate_id, r.event_id.toLowerCase()]));
  }

  async stillParked(): Promise<StillParked[]> {
    const keys = [...this.chased, ...this.given.keys()];
    if (keys.length === 0) return [];
    const { rows } = await this.o.pool.query<{ aggregate_id: string; head: string; parked: number }>(
      `SELECT aggregate_id, (array_agg(event_id ORDER BY seq))[1] AS head, count(*)::int AS parked FROM ${this.o.parkedTable}
        WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]) GROUP BY aggregate_id ORDER BY aggregate_id`,
      [this.o.consumer, this.o.aggregateType, keys],
    );
    return rows.map((r) => ({
      key: r.aggregate_id,
      ...(this.given.get(r.aggregate_id) ?? { reason: 'follow-timeout' as const }),
      head: r.head,
      parkedRows: r.parked,
    }));
  }

  private async parked(key: string, id: string): Promise<boolean> {
    const { rows } = await this.o.pool.query(`SELECT 1 FROM ${this.o.parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND event_id IN ($4, lower($4))`, [
      this.o.consumer,
      this.o.aggregateType,
      key,
      id,
    ]);
    return rows.length > 0;
  }
}
