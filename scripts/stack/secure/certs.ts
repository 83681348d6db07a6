import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import { run, which } from '../processes';
import { SECURE_DNS_NAME, SECURE_HOST } from './secure-settings';

/** The services that get a server certificate of their own, signed by the stack's private CA. */
export const CERTIFIED_SERVICES = ['postgres', 'kafka', 'connect', 'registry'] as const;
export type CertifiedService = (typeof CERTIFIED_SERVICES)[number];

/** Where a service's certificate files are: PEM for PostgreSQL, nginx and Node; PKCS12 for the JVMs. */
export interface ServiceCert {
  cert: string;
  key: string;
  /** PKCS12 keystore (certificate, key, CA chain) under `keystorePassword`. */
  keystore: string;
}

export interface StackCerts {
  dir: string;
  /** The CA certificate every client trusts (PEM): OUTBOX_*_SSL_CA / sslrootcert point here. */
  caCert: string;
  caKey: string;
  /** The same CA as a PKCS12 truststore, for JVM clients that want one. */
  truststore: string;
  /** The password of every PKCS12 store (a development value, like the stack's others). */
  keystorePassword: string;
  /** A second CA no service uses: a client that trusts it must refuse every server (the untrusted-certificate tests). */
  otherCaCert: string;
  /** A server certificate of the stack's CA that expired in 2020, for the expired-certificate tests' stand-in servers. */
  expired: { cert: string; key: string };
  services: Record<CertifiedService, ServiceCert>;
}

const KEYSTORE_PASSWORD = 'keystore-secure-local';

export function stackCertsAt(dir: string): StackCerts {
  const service = (name: CertifiedService): ServiceCert => ({ cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`), keystore: join(dir, `${name}.p12`) });
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    truststore: join(dir, 'truststore.p12'),
    keystorePassword: KEYSTORE_PASSWORD,
    otherCaCert: join(dir, 'other-ca.crt'),
    expired: { cert: join(dir, 'expired.crt'), key: join(dir, 'expired.key') },
    services: Object.fromEntries(CERTIFIED_SERVICES.map((s) => [s, service(s)])) as Record<CertifiedService, ServiceCert>,
  };
}

/**
 * The private CA and a certificate per service, made once with Debian's openssl (and the JDK's keytool
 * for the truststore) and kept across `stack up`; `stack down --clean` removes them. Server certificates
 * name 127.0.0.1 and localhost, so clients verify the host as well as the chain (verify-full).
 */
export function ensureCerts(dir: string, keytool: string): { certs: StackCerts; created: boolean } {
  const certs = stackCertsAt(dir);
  const complete = join(dir, '.complete');
  if (existsSync(complete)) {
    // Stacks made before the expired certificate existed get it on their next `up`.
    if (!existsSync(certs.expired.cert)) makeExpiredCert(certs);
    return { certs, created: false };
  }
  if (!which('openssl')) {
    throw new OutboxError('STACK_SERVICE_FAILED', 'The secure profile makes its certificates with openssl, which is not on PATH. Install it with `apt-get install -y openssl`.');
  }
  mkdirSync(dir, { recursive: true });
  makeCa(certs.caKey, certs.caCert, 'outbox-router local stack CA');
  makeCa(join(dir, 'other-ca.key'), certs.otherCaCert, 'an unrelated CA (untrusted by every service)');
  for (const name of CERTIFIED_SERVICES) makeServerCert(certs, name);
  makeExpiredCert(certs);
  tool(keytool, ['-importcert', '-noprompt', '-alias', 'outbox-local-ca', '-file', certs.caCert, '-keystore', certs.truststore, '-storetype', 'PKCS12', '-storepass', KEYSTORE_PASSWORD]);
  writeFileSync(complete, `${new Date().toISOString()}\n`);
  return { certs, created: true };
}

function makeCa(key: string, cert: string, name: string): void {
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '3650', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function makeServerCert(certs: StackCerts, name: CertifiedService): void {
  const { cert, key, keystore } = certs.services[name];
  const csr = join(certs.dir, `${name}.csr`);
  const ext = join(certs.dir, `${name}.ext`);
  writeFileSync(ext, [
    `subjectAltName=IP:${SECURE_HOST},DNS:${SECURE_DNS_NAME}`,
    'basicConstraints=CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    // clientAuth too: a broker is also a client of the controller and of the other brokers.
    'extendedKeyUsage=serverAuth,clientAuth',
    '',
  ].join('\n'));
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=outbox-${name}`]);
  openssl(['x509', '-req', '-in', csr, '-CA', certs.caCert, '-CAkey', certs.caKey, '-CAcreateserial', '-days', '825', '-sha256', '-extfile', ext, '-out', cert]);
  openssl(['pkcs12', '-export', '-in', cert, '-inkey', key, '-certfile', certs.caCert, '-name', name, '-out', keystore, '-passout', `pass:${KEYSTORE_PASSWORD}`]);
}

/**
 * A certificate valid only in January 2020, signed by the stack's CA: `openssl x509` cannot back-date,
 * `openssl ca` can (-startdate/-enddate), with a throw-away CA database.
 */
function makeExpiredCert(certs: StackCerts): void {
  const work = join(certs.dir, 'expired-ca');
  mkdirSync(work, { recursive: true });
  writeFileSync(join(work, 'index.txt'), '');
  writeFileSync(join(work, 'serial'), '1000\n');
  writeFileSync(join(work, 'ca.cnf'), `[ca]\ndefault_ca = local\n[local]\ndatabase = ${join(work, 'index.txt')}\nserial = ${join(work, 'serial')}\nnew_certs_dir = ${work}\ndefault_md = sha256\npolicy = any\ncopy_extensions = none\n[any]\ncommonName = supplied\n`);
  writeFileSync(join(work, 'ext'), `subjectAltName=IP:${SECURE_HOST},DNS:${SECURE_DNS_NAME}\nextendedKeyUsage=serverAuth\n`);
  const csr = join(work, 'expired.csr');
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', certs.expired.key, '-out', csr, '-subj', '/CN=outbox-expired']);
  openssl(['ca', '-batch', '-config', join(work, 'ca.cnf'), '-cert', certs.caCert, '-keyfile', certs.caKey, '-startdate', '20200101000000Z', '-enddate', '20200201000000Z',
    '-in', csr, '-out', certs.expired.cert, '-notext', '-extfile', join(work, 'ext')]);
}

function openssl(args: string[]): void {
  tool('openssl', args);
}

function tool(command: string, args: string[]): void {
  const result = run(command, args);
  if (result.status !== 0) {
    throw new OutboxError('STACK_SERVICE_FAILED', `Making the secure stack's certificates failed: \`${command} ${args.slice(0, 2).join(' ')} …\` said:\n${result.output.trim().split('\n').slice(-5).join('\n')}`);
  }
}
