import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

/** RFC 3454 table C.1.2: non-ASCII spaces, mapped to U+0020 by SASLprep (RFC 4013 §2.1). */
const NON_ASCII_SPACE = /[\u00A0\u1680\u2000-\u200B\u202F\u205F\u3000]/g;
/** RFC 3454 table B.1: "commonly mapped to nothing" (RFC 4013 §2.1). */
// eslint-disable-next-line no-misleading-character-class
const MAPPED_TO_NOTHING = /[\u00AD\u034F\u1806\u180B-\u180D\u200C\u200D\u2060\uFE00-\uFE0F\uFEFF]/g;

/**
 * SASLprep's mapping and NFKC steps, which clients (libpq, node-postgres) apply before hashing: a
 * verifier made from the raw text would never match their proof for such passwords.
 */
export function saslprep(password: string): string {
  return password.replace(NON_ASCII_SPACE, ' ').replace(MAPPED_TO_NOTHING, '').normalize('NFKC');
}

/**
 * A SCRAM-SHA-256 verifier (RFC 7677, PostgreSQL's stored format). Setting a role's password as a
 * verifier keeps the clear text out of the server's statement log and pg_stat_activity.
 */
export function scramVerifier(password: string, iterations = 4096, salt: Buffer = randomBytes(16)): string {
  const salted = pbkdf2Sync(saslprep(password), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
