/** src/log/redact.ts: the one home of redaction, used by config, connector, status, watchdog and the HTTP clients. */
import { displayValue, redactConnectorConfig } from '../../../src/connector/config-diff';
import { maskUrl } from '../../../src/status/format';
import { safeTarget } from '../../../src/watchdog/deliver';
import { REDACTED, redactSecrets, redactUrl, redactValue, scrubHttpError, urlOrigin } from '../../../src/log/redact';

describe('redaction', () => {
  it('hides URL credentials wherever a URL appears in a text', () => {
    expect(redactUrl('at http://u:pw@h:1/x and https://tok@h2/y')).toBe(`at http://${REDACTED}@h:1/x and https://${REDACTED}@h2/y`);
    expect(redactUrl('http://h/x')).toBe('http://h/x');
  });

  it('status and the watchdog use the same helpers', () => {
    expect(maskUrl('http://admin:s3cret@connect:8083/x')).toBe(redactUrl('http://admin:s3cret@connect:8083/x'));
    expect(safeTarget('https://hooks.slack.com/services/T/B/secret?x=1')).toBe('https://hooks.slack.com');
    expect(urlOrigin('not a url')).toBe('(invalid URL)');
  });

  it('secret keys: password, secret and token, at any depth; provider references may be shown', () => {
    expect(redactSecrets({ a: { password: 'p', apiToken: 't', url: 'http://u:p@h' }, list: [{ secret: 's' }] })).toEqual({
      a: { password: REDACTED, apiToken: REDACTED, url: `http://${REDACTED}@h` },
      list: [{ secret: REDACTED }],
    });
    expect(redactValue('database.password', 'plain')).toBe(REDACTED);
    expect(displayValue('database.password', '${env:PW}')).toBe('${env:PW}');
    expect(displayValue('database.password', 'plain')).toBe(REDACTED);
    expect(redactConnectorConfig({ 'x.token': 'abc', 'slot.name': 's' })).toEqual({ 'x.token': REDACTED, 'slot.name': 's' });
  });

  it('scrubs the credentials an axios error carries', () => {
    const error = { config: { auth: { username: 'u', password: 'p' }, headers: { Authorization: 'Basic x' } }, request: { secret: 1 } };
    scrubHttpError(error);
    expect(JSON.stringify(error)).not.toMatch(/Basic x|"p"/);
    expect(Object.keys(error)).not.toContain('request');
  });
});
