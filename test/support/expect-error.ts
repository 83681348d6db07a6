import { isOutboxError, type OutboxError } from '../../src/errors';

/** The OutboxError `promise` rejects with; fails the test if it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<OutboxError> {
  try {
    await promise;
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected an OutboxError, but the promise resolved');
}

/** The OutboxError `fn` throws; fails the test if it returns or throws anything else. */
export function thrown(fn: () => unknown): OutboxError {
  try {
    fn();
  } catch (error) {
    if (isOutboxError(error)) return error;
    throw error;
  }
  throw new Error('expected an OutboxError, but nothing was thrown');
}
