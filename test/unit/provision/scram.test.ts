/**
 * src/provision/scram.ts: the SCRAM-SHA-256 verifier PostgreSQL stores in pg_authid.
 *
 * The known-answer test uses the RFC 7677 section 3 example exchange (user "user", password
 * "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations). The RFC publishes the client proof and
 * the server signature, not StoredKey/ServerKey, so the test does what a server does with a verifier
 * (RFC 5802 section 3): ServerSignature = HMAC(ServerKey, AuthMessage) must equal the RFC's `v=`, and
 * ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage) must hash to StoredKey. Neither check
 * repeats the PBKDF2 / key derivation under test.
 */
import { createHash, createHmac } from 'node:crypto';
import { scramVerifier } from '../../../src/provision/scram';

const VERIFIER = /^SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2}):([A-Za-z0-9+/]+={0,2})$/;

function parse(verifier: string) {
  const m = VERIFIER.exec(verifier);
  if (!m) throw new Error(`not a SCRAM-SHA-256 verifier: ${verifier}`);
  return {
    iterations: Number(m[1]),
    salt: Buffer.from(m[2] as string, 'base64'),
    storedKey: Buffer.from(m[3] as string, 'base64'),
    serverKey: Buffer.from(m[4] as string, 'base64'),
  };
}

// RFC 7677 section 3.
const RFC = {
  password: 'pencil',
  salt: Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64'),
  clientFirstBare: 'n=user,r=rOprNGfwEbeRWgbNEkqO',
  serverFirst: 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
  clientFinalWithoutProof: 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0',
  clientProof: 'dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
  serverSignature: '6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
};
const AUTH_MESSAGE = `${RFC.clientFirstBare},${RFC.serverFirst},${RFC.clientFinalWithoutProof}`;

/** What the server checks at login, given the stored verifier and the RFC's exchange. */
function verifiesRfcExchange(verifier: string): { serverSignatureOk: boolean; clientProofOk: boolean } {
  const { storedKey, serverKey } = parse(verifier);
  const serverSignature = createHmac('sha256', serverKey).update(AUTH_MESSAGE).digest('base64');
  const clientSignature = createHmac('sha256', storedKey).update(AUTH_MESSAGE).digest();
  const proof = Buffer.from(RFC.clientProof, 'base64');
  const clientKey = Buffer.from(proof.map((b, i) => b ^ (clientSignature[i] as number)));
  return {
    serverSignatureOk: serverSignature === RFC.serverSignature,
    clientProofOk: createHash('sha256').update(clientKey).digest().equals(storedKey),
  };
}

describe('scramVerifier', () => {
  it('has PostgreSQL’s format SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>', () => {
    const v = scramVerifier('secret');
    expect(v).toMatch(VERIFIER);
    const parsed = parse(v);
    expect(parsed.iterations).toBe(4096);
    expect(parsed.salt).toHaveLength(16);
    expect(parsed.storedKey).toHaveLength(32);
    expect(parsed.serverKey).toHaveLength(32);
  });

  it('uses a fresh random salt by default', () => {
    const a = parse(scramVerifier('secret'));
    const b = parse(scramVerifier('secret'));
    expect(a.salt.equals(b.salt)).toBe(false);
    expect(a.storedKey.equals(b.storedKey)).toBe(false);
  });

  it('is deterministic for a fixed salt and iteration count, and records both', () => {
    const salt = Buffer.from('0123456789abcdef');
    expect(scramVerifier('secret', 4096, salt)).toBe(scramVerifier('secret', 4096, salt));
    expect(parse(scramVerifier('secret', 4096, salt)).salt.equals(salt)).toBe(true);
    expect(parse(scramVerifier('secret', 5000, salt)).iterations).toBe(5000);
  });

  it('differs for another password, another salt or another iteration count', () => {
    const salt = Buffer.from('0123456789abcdef');
    const base = parse(scramVerifier('secret', 4096, salt));
    for (const other of [
      scramVerifier('secret2', 4096, salt),
      scramVerifier('secret', 4096, Buffer.from('fedcba9876543210')),
      scramVerifier('secret', 4097, salt),
    ]) {
      const p = parse(other);
      expect(p.storedKey.equals(base.storedKey)).toBe(false);
      expect(p.serverKey.equals(base.serverKey)).toBe(false);
    }
  });

  it('reproduces the RFC 7677 example: the server signature and the client proof verify', () => {
    const v = scramVerifier(RFC.password, 4096, RFC.salt);
    expect(v.startsWith('SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$')).toBe(true);
    expect(verifiesRfcExchange(v)).toEqual({ serverSignatureOk: true, clientProofOk: true });
  });

  it('a verifier for another password does not verify the RFC exchange', () => {
    expect(verifiesRfcExchange(scramVerifier('pencil2', 4096, RFC.salt))).toEqual({ serverSignatureOk: false, clientProofOk: false });
  });

  it('normalizes the password with SASLprep like clients do: a soft hyphen maps to nothing (RFC 4013, table B.1)', () => {
    // libpq and node-postgres (node_modules/pg/lib/crypto/sasl.js) SASLprep the password before PBKDF2, so
    // "pen\u00ADcil" logs in as "pencil". A verifier that skips this mapping makes that login fail.
    expect(verifiesRfcExchange(scramVerifier('pen\u00ADcil', 4096, RFC.salt))).toEqual({ serverSignatureOk: true, clientProofOk: true });
  });

  it('normalizes compatibility characters (NFKC): a full-width password equals its ASCII form', () => {
    expect(verifiesRfcExchange(scramVerifier('\uFF50\uFF45\uFF4E\uFF43\uFF49\uFF4C', 4096, RFC.salt))).toEqual({ serverSignatureOk: true, clientProofOk: true });
  });
});
