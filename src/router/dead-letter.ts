import type { IHeaders, Message } from 'kafkajs';

/** What is known about a record that is given up on. */
export interface DeadLetterInput {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers?: IHeaders;
  errorCode: string;
  errorMessage: string;
  attempts: number;
}

/** Kafka puts no limit on header size, but a stack trace in every dead letter helps nobody. */
export const MAX_ERROR_MESSAGE_CHARS = 2_000;

/**
 * The dead letter: the original key, value and headers unchanged, so `dlq:replay` can re-publish it as
 * it was, plus `x-` headers saying where it came from and why it was given up on (DESIGN.md).
 */
export function buildDeadLetter(input: DeadLetterInput): Message {
  const headers: IHeaders = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (value !== undefined && !name.startsWith('x-original-') && !name.startsWith('x-error-') && name !== 'x-attempts') headers[name] = value;
  }
  const message = input.errorMessage.length > MAX_ERROR_MESSAGE_CHARS ? `${input.errorMessage.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…` : input.errorMessage;
  Object.assign(headers, {
    'x-original-topic': input.topic,
    'x-original-partition': String(input.partition),
    'x-original-offset': input.offset,
    'x-error-code': input.errorCode,
    'x-error-message': message,
    'x-attempts': String(input.attempts),
  });
  return { key: input.key, value: input.value, headers };
}
