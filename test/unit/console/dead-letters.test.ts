import type { Codec } from '../../../src/codec';
import { decodePayload, filterLetters, headerValue, letterView, type LetterState } from '../../../src/console/dead-letters';
import type { CachedLetter } from '../../../src/console/dlq-cache';
import { maskRules } from '../../../src/console/mask';

const letter = (offset: number, id: string, extra: Record<string, string> = {}, timestamp = 1_000 + offset): CachedLetter => ({
  topic: 'outbox.dlq.order',
  partition: 0,
  offset: String(offset),
  timestamp,
  key: extra.key ?? 'k1',
  value: Buffer.from(JSON.stringify({ orderId: 'o', customer: { email: 'a@example.com' } })),
  headers: { id, eventType: 'OrderCancelled', contentType: 'application/json', 'x-consumer': 'c1', 'x-error-code': 'HANDLER_FAILED', 'x-attempts': '3', headers: '{"tenant":"t","email":"x@y"}', ...extra },
});

/** Only the JSON path of the codec, which is what these letters carry. */
const codec = {
  decodeWithInfo: async (bytes: Buffer) => ({ payload: JSON.parse(bytes.toString('utf8')) as unknown, contentType: 'application/json' }),
} as unknown as Codec;

describe('console: the dead-letter list', () => {
  it('outstanding: the newest letter of each parked event, newest first; every letter with `all`', () => {
    const a1 = letter(0, 'e-a');
    const b = letter(1, 'e-b');
    const a2 = letter(2, 'e-a');
    const c = letter(3, 'e-c', { 'x-consumer': 'c2', key: 'k2' });
    const states = new Map<CachedLetter, LetterState>([
      [a1, 'parked'],
      [b, 'applied'],
      [a2, 'parked'],
      [c, 'parked'],
    ]);
    const all = [a1, b, a2, c];
    expect(filterLetters(all, states, {})).toEqual([c, a2]);
    expect(filterLetters(all, states, { state: 'all' })).toEqual([c, a2, b, a1]);
    expect(filterLetters(all, states, { state: 'all', consumer: 'c1', key: 'k1', errorCode: 'HANDLER_FAILED', eventType: 'OrderCancelled' })).toEqual([a2, b, a1]);
    expect(filterLetters(all, states, { state: 'all', since: 1_001, until: 1_002 })).toEqual([a2, b]);
    expect(filterLetters(all, states, { state: 'all', errorCode: 'OTHER' })).toEqual([]);
  });

  it('a letter as the page shows it: headers as text (bytes as hex), sensitive fields masked in the payload and the writer\'s headers', async () => {
    const rules = maskRules(['email']);
    const l = letter(5, 'e-x', { 'x-original-topic': 'outbox.event.order', 'x-original-offset': '42' });
    l.headers.binary = Buffer.from([0xff, 0x00]);
    const view = letterView(l, 'parked', await decodePayload(l, codec, rules), rules);
    expect(view).toMatchObject({ ref: 'outbox.dlq.order/0/5', id: 'e-x', key: 'k1', attempts: 3, consumer: 'c1', state: 'parked', original: { topic: 'outbox.event.order', partition: null, offset: '42' } });
    expect(view.payload).toMatchObject({ decoded: { orderId: 'o', customer: { email: '[masked]' } }, masked: 1, format: 'json', preview: null });
    expect(view.headers.headers).toBe('{"tenant":"t","email":"[masked]"}');
    expect(view.headers.binary).toBe('hex:ff00');
    expect(JSON.stringify(view)).not.toContain('a@example.com');
    expect(JSON.stringify(view)).not.toContain('x@y');
    expect(headerValue(['first', 'second'])).toBe('first');
  });

  it('an undecodable payload: the reason, and its bytes only when no field is marked sensitive', async () => {
    const broken = { ...letter(6, 'e-y'), value: Buffer.from('{not json') };
    const failing = { decodeWithInfo: async () => Promise.reject(new Error('Unexpected token n')) } as unknown as Codec;
    expect(await decodePayload(broken, failing, maskRules([]))).toMatchObject({ error: 'Unexpected token n', preview: '{not json', decoded: null });
    expect(await decodePayload(broken, failing, maskRules(['email']))).toMatchObject({ error: 'Unexpected token n', preview: null });
    expect(await decodePayload({ ...broken, value: null }, failing, maskRules([]))).toMatchObject({ error: 'no payload (a reduced dead letter keeps none)' });
  });
});
