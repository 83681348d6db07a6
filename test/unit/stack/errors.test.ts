/** src/errors/index.ts: the one error type and its type guard. */
import { ERROR_CODES, OutboxError, isOutboxError } from '../../../src/errors';

describe('OutboxError', () => {
  it('is an Error named OutboxError carrying code and message', () => {
    const error = new OutboxError('STACK_PORT_IN_USE', 'port 9092 is taken');
    expect(error).toBeInstanceOf(Error);
    expect(error).toBeInstanceOf(OutboxError);
    expect(error.name).toBe('OutboxError');
    expect(error.code).toBe('STACK_PORT_IN_USE');
    expect(error.message).toBe('port 9092 is taken');
    expect(String(error)).toBe('OutboxError: port 9092 is taken');
  });

  it('defaults to not retriable, empty details and no cause', () => {
    const error = new OutboxError('CONFIG_INVALID', 'bad');
    expect(error.retriable).toBe(false);
    expect(error.details).toEqual({});
    expect(Object.isFrozen(error.details)).toBe(true);
    expect('cause' in error).toBe(false);
  });

  it('carries retriable, details and cause when given', () => {
    const cause = new Error('ECONNREFUSED');
    const error = new OutboxError('STACK_DOWNLOAD_FAILED', 'maven failed', {
      retriable: true,
      cause,
      details: { artifact: 'kafka_2.13' },
    });
    expect(error.retriable).toBe(true);
    expect(error.cause).toBe(cause);
    expect(error.details).toEqual({ artifact: 'kafka_2.13' });
  });

  it('keeps a falsy but defined cause', () => {
    const error = new OutboxError('STACK_NOT_READY', 'x', { cause: 0 });
    expect('cause' in error).toBe(true);
    expect(error.cause).toBe(0);
  });

  it('copies and freezes details, so neither the caller nor a handler can change them afterwards', () => {
    const details: Record<string, unknown> = { service: 'kafka' };
    const error = new OutboxError('STACK_SERVICE_FAILED', 'died', { details });
    details.service = 'connect';
    details.extra = 1;
    expect(error.details).toEqual({ service: 'kafka' });
    expect(Object.isFrozen(error.details)).toBe(true);
    expect(() => {
      (error.details as Record<string, unknown>).service = 'registry';
    }).toThrow(TypeError);
  });

  it('lists each code once', () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    expect(ERROR_CODES).toEqual(expect.arrayContaining(['CONFIG_INVALID', 'STACK_JAVA_MISSING', 'STACK_PORT_IN_USE']));
  });
});

describe('isOutboxError', () => {
  const error = new OutboxError('STACK_JAVA_MISSING', 'no java');

  it('without a code accepts any OutboxError and nothing else', () => {
    expect(isOutboxError(error)).toBe(true);
    expect(isOutboxError(new Error('no java'))).toBe(false);
    expect(isOutboxError({ name: 'OutboxError', code: 'STACK_JAVA_MISSING', message: 'no java' })).toBe(false);
    expect(isOutboxError(undefined)).toBe(false);
    expect(isOutboxError('STACK_JAVA_MISSING')).toBe(false);
  });

  it('with a code accepts only that code', () => {
    expect(isOutboxError(error, 'STACK_JAVA_MISSING')).toBe(true);
    expect(isOutboxError(error, 'CONFIG_INVALID')).toBe(false);
    expect(isOutboxError(new Error('x'), 'STACK_JAVA_MISSING')).toBe(false);
  });
});
