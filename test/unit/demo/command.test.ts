/** scripts/demo/command.ts: out-of-range numbers are FLAG_INVALID, refused before the stack is touched. */
import { demoCommand } from '../../../scripts/demo/command';
import { thrown } from '../../support/expect-error';

describe('outbox demo flags', () => {
  const parse = (args: string[]) => demoCommand().action(() => {}).parse(args, { from: 'user' });

  it.each([
    ['--events', '0', '--events must be a number above 0 and at most 1000000, got "0".'],
    ['--rate', 'fast', '--rate must be a number above 0 and at most 20000, got "fast".'],
    ['--rollback-share', '0.9', '--rollback-share must be a number above 0 and at most 0.5, got "0.9".'],
    ['--warmup-seconds', '-1', '--warmup-seconds must be a number above 0 and at most 600, got "-1".'],
  ])('%s %s is FLAG_INVALID', (flag, value, message) => {
    const error = thrown(() => parse([flag, value]));
    expect(error.code).toBe('FLAG_INVALID');
    expect(error.message).toBe(message);
  });

  it('accepts values in range', () => {
    expect(parse(['--events', '10', '--rate', '50', '--warmup-seconds', '0']).opts()).toMatchObject({ events: 10, rate: 50, warmupSeconds: 0 });
  });
});
