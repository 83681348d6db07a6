import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

/**
 * A SCRAM-SHA-256 verifier (RFC 7677, PostgreSQL's stored format). Setting a role's password as a
 * verifier keeps the clear text out of the server's statement log and pg_stat_activity.
 */
export function scramVerifier(password: string, iterations = 4096, salt: Buffer = randomBytes(16)): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}
