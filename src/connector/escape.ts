/**
 * Escaping for the three languages a connector config embeds names in: SQL (the heartbeat query),
 * Java regular expressions (table.include.list, the SMT predicate) and Kafka topic names (Debezium's
 * sanitizer). Configuration never reaches any of them unescaped.
 */

/** SQL identifier quoting: node-postgres's own (one implementation for the whole project). */
export { escapeIdentifier as quoteIdent } from '../db';

/**
 * A Java regex that matches exactly `text`. Letters, digits, `_` and `-` stand for themselves (none is
 * special outside a character class), `.` becomes `\.`, and every other code point becomes `\x{HEX}`.
 * That form contains no comma (Debezium splits include lists on unescaped commas), no whitespace
 * (Debezium trims list items) and no `${` (Connect's config providers would resolve `${a:b}`).
 */
export function javaRegexLiteral(text: string): string {
  let out = '';
  for (const ch of text) {
    if (/[A-Za-z0-9_-]/.test(ch)) out += ch;
    else if (ch === '.') out += '\\.';
    else out += `\\x{${(ch.codePointAt(0) as number).toString(16).toUpperCase()}}`;
  }
  return out;
}

/** Debezium's topic name limit (TopicNamingStrategy.MAX_NAME_LENGTH). */
const MAX_TOPIC_NAME = 249;

/**
 * The topic name Debezium gives a data change record, as its TopicNamingStrategy#sanitizedTopicName does
 * (debezium-core `io.debezium.spi.topic.TopicNamingStrategy`, `AbstractTopicNamingStrategy`): every
 * UTF-16 unit outside `[a-zA-Z0-9._-]` becomes `_`, and the result is cut at 249 characters.
 */
export function debeziumTopicName(...parts: string[]): string {
  const joined = parts.filter((p) => p.trim() !== '').join('.');
  let out = '';
  for (let i = 0; i < joined.length; i++) {
    const ch = joined[i] as string;
    out += /[a-zA-Z0-9._-]/.test(ch) ? ch : '_';
  }
  return out.slice(0, MAX_TOPIC_NAME);
}

/** Connect resolves `${provider:path:key}` in every config value (Kafka ConfigTransformer.DEFAULT_PATTERN). */
export const CONFIG_PROVIDER_REFERENCE = /\$\{[^}]*?:(?:[^}]*?:)?[^}]*?\}/;

/** A value that is nothing but one config-provider reference, like `${env:OUTBOX_CDC_PASSWORD}`. */
export function isProviderReference(value: string): boolean {
  return /^\$\{[^}:]+:[^}]+\}$/.test(value);
}
