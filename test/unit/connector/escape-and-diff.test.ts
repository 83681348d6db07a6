/** src/connector/escape.ts and src/connector/config-diff.ts: escaping, the config diff and its redaction. */
import { diffConfigs, formatDiff, redactConnectorConfig } from '../../../src/connector';
import { debeziumTopicName, isProviderReference, javaRegexLiteral, quoteIdent } from '../../../src/connector/escape';

describe('escaping', () => {
  it('quotes SQL identifiers, doubling embedded quotes', () => {
    expect(quoteIdent('plain')).toBe('"plain"');
    expect(quoteIdent('a"b""c')).toBe('"a""b""""c"');
  });

  it('writes other code points as \\x{HEX}, astral ones as one code point', () => {
    expect(javaRegexLiteral('a-b_c.d')).toBe('a-b_c\\.d');
    expect(javaRegexLiteral('x,y ${env:A}')).toBe('x\\x{2C}y\\x{20}\\x{24}\\x{7B}env\\x{3A}A\\x{7D}');
    expect(javaRegexLiteral('é😀')).toBe('\\x{E9}\\x{1F600}');
  });

  it('sanitizes topic names like Debezium: per UTF-16 unit, cut at 249', () => {
    expect(debeziumTopicName('outbox', 'public', 'outbox')).toBe('outbox.public.outbox');
    expect(debeziumTopicName('p', 's', 'we"ird tab')).toBe('p.s.we_ird_tab');
    expect(debeziumTopicName('p', 's', '😀')).toBe('p.s.__');
    expect(debeziumTopicName('p', 's', 'x'.repeat(300))).toHaveLength(249);
  });

  it('recognises config-provider references', () => {
    expect(isProviderReference('${env:OUTBOX_CDC_PASSWORD}')).toBe(true);
    expect(isProviderReference('${file:/run/secrets/x:key}')).toBe(true);
    expect(isProviderReference('${routedByValue}')).toBe(false);
    expect(isProviderReference('pre${env:X}')).toBe(false);
  });
});

describe('diffConfigs', () => {
  const current = { a: '1', b: '2', gone: 'x', 'database.password': '${env:OLD}' };

  it('lists added, changed and removed keys in key order', () => {
    const diff = diffConfigs(current, { a: '1', b: '3', c: '4', 'database.password': '${env:OLD}' });
    expect(diff.added).toEqual([{ key: 'c', value: '4' }]);
    expect(diff.changed).toEqual([{ key: 'b', from: '2', to: '3' }]);
    expect(diff.removed).toEqual([{ key: 'gone', value: 'x' }]);
    expect(diff.unchanged).toBe(false);
    expect(formatDiff(diff)).toEqual(['+ c=4', '~ b: 2 -> 3', '- gone=x']);
  });

  it('is unchanged only for an existing connector with the same entries', () => {
    expect(diffConfigs({ ...current }, { ...current }).unchanged).toBe(true);
    expect(diffConfigs(undefined, {}).unchanged).toBe(false);
    expect(diffConfigs(undefined, { a: '1' }).added).toEqual([{ key: 'a', value: '1' }]);
  });

  it('shows a password reference but redacts plain secrets on both sides', () => {
    const diff = diffConfigs(
      { 'database.password': 'old-plain-pw', 'ssl.secret.key': 'k1', 'database.sslpassword': 'ssl-plain' },
      { 'database.password': '${env:OUTBOX_CDC_PASSWORD}', 'ssl.secret.key': 'k2', other: 'x' },
    );
    expect(diff.changed).toEqual([
      { key: 'database.password', from: '[redacted]', to: '${env:OUTBOX_CDC_PASSWORD}' },
      { key: 'ssl.secret.key', from: '[redacted]', to: '[redacted]' },
    ]);
    expect(diff.removed).toEqual([{ key: 'database.sslpassword', value: '[redacted]' }]);
    const text = JSON.stringify(diff) + formatDiff(diff).join('\n');
    for (const secret of ['old-plain-pw', 'k1', 'k2', 'ssl-plain']) expect(text).not.toContain(secret);
  });

  it('redacts a whole config for printing', () => {
    expect(redactConnectorConfig({ 'database.password': 'plain', 'database.user': 'u' })).toEqual({ 'database.password': '[redacted]', 'database.user': 'u' });
  });
});
