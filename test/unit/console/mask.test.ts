import { MASKED, maskRules, maskValue } from '../../../src/console/mask';

describe('console: masking sensitive payload fields', () => {
  const payload = { orderId: 'o-1', customer: { email: 'a@example.com', name: 'A', address: { email: 'b@example.com' } }, lines: [{ sku: 'X', card: '4111' }], card: '4242', note: null };

  it('a bare name masks that key at any depth, in arrays too; a dotted path only from the root', () => {
    const { value, masked } = maskValue(payload, maskRules(['card', 'customer.email']));
    expect(value).toEqual({ orderId: 'o-1', customer: { email: MASKED, name: 'A', address: { email: 'b@example.com' } }, lines: [{ sku: 'X', card: MASKED }], card: MASKED, note: null });
    expect(masked).toBe(3);
  });

  it('`*` stands for any one key; a masked object is masked whole', () => {
    expect(maskValue(payload, maskRules(['*.address'])).value).toMatchObject({ customer: { address: MASKED } });
    expect(maskValue(payload, maskRules(['customer'])).value).toMatchObject({ customer: MASKED, orderId: 'o-1' });
    expect(maskValue(payload, maskRules(['lines.sku'])).value).toMatchObject({ lines: [{ sku: MASKED, card: '4111' }] });
  });

  it('without rules the payload is unchanged, and the input is never modified', () => {
    const copy = JSON.parse(JSON.stringify(payload));
    expect(maskValue(payload, maskRules([])).value).toEqual(payload);
    maskValue(payload, maskRules(['card']));
    expect(payload).toEqual(copy);
    expect(maskValue('text', maskRules(['card'])).value).toBe('text');
  });
});
