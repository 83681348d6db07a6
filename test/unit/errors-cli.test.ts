/** src/errors: no plain Error crosses the CLI boundary; what the CLI prints for any failure. */
import { cliErrorText, ERROR_CODES, OutboxError, toOutboxError } from '../../src/errors';

describe('toOutboxError', () => {
  it('keeps an OutboxError as it is', () => {
    const error = new OutboxError('FLAG_INVALID', 'bad flag');
    expect(toOutboxError(error)).toBe(error);
  });

  it('wraps anything else as INTERNAL, with the message and the original as cause', () => {
    const plain = new TypeError('x is not a function');
    const wrapped = toOutboxError(plain);
    expect(wrapped).toBeInstanceOf(OutboxError);
    expect(wrapped.code).toBe('INTERNAL');
    expect(wrapped.message).toBe('unexpected failure, please report it: x is not a function');
    expect(wrapped.cause).toBe(plain);
    expect(toOutboxError('a string').message).toBe('unexpected failure, please report it: a string');
    expect(ERROR_CODES).toContain('INTERNAL');
  });
});

describe('cliErrorText', () => {
  it('prints one paragraph: message, then code, for known and unknown errors alike', () => {
    expect(cliErrorText(new OutboxError('DLQ_TOPIC_MISSING', 'no such topic'))).toBe('outbox: no such topic\n(error code DLQ_TOPIC_MISSING; see docs/errors.md)\n');
    const text = cliErrorText(new Error('boom'));
    expect(text).toBe('outbox: unexpected failure, please report it: boom\n(error code INTERNAL; see docs/errors.md)\n');
    expect(text).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('names the file and the fix when a write fails for permissions or space', () => {
    const fsError = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES', path: '/x/y' });
    expect(cliErrorText(fsError)).toBe('outbox: cannot write /x/y (EACCES). Make it writable, free disk space, or point OUTBOX_STACK_DIR / OUTBOX_CACHE_DIR elsewhere.\n');
  });
});
