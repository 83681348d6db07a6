import { loadConfig } from '../../../src/config';
import { watchdogUrlOf } from '../../../src/status';

describe('watchdogUrlOf: status finds the watchdog where the configuration puts it', () => {
  const env = (vars: Record<string, string>) => loadConfig({ env: vars });

  it('the local stack default', () => {
    expect(watchdogUrlOf(env({}))).toBe('http://127.0.0.1:9465');
  });

  it('follows OUTBOX_WATCHDOG_METRICS_HOST and _PORT; a wildcard address is reached on loopback, IPv6 in brackets', () => {
    expect(watchdogUrlOf(env({ OUTBOX_WATCHDOG_METRICS_HOST: 'watchdog.internal', OUTBOX_WATCHDOG_METRICS_PORT: '9999' }))).toBe('http://watchdog.internal:9999');
    expect(watchdogUrlOf(env({ OUTBOX_WATCHDOG_METRICS_HOST: '0.0.0.0' }))).toBe('http://127.0.0.1:9465');
    expect(watchdogUrlOf(env({ OUTBOX_WATCHDOG_METRICS_HOST: '::1' }))).toBe('http://[::1]:9465');
  });
});
