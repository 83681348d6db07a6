import { join } from 'node:path';
import { OutboxError } from 'outbox-router/errors';
import { resolveStackConfig } from '../config';
import { findJava } from '../java';
import { run } from '../processes';
import { secureStackPaths } from './secure-stack';
import { SECURE_HOST, SECURE_PORTS } from './secure-settings';

/**
 * Sets a SCRAM-SHA-512 user's password on the secure stack's broker, as an operator rotating a
 * credential would (`kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=…]'`). Connections
 * already authenticated stay so (the broker does not re-authenticate them: connections.max.reauth.ms
 * is 0); every new one needs the new password.
 */
export function rotateScramPassword(user: string, password: string): void {
  const config = resolveStackConfig({});
  const paths = secureStackPaths(config);
  const java = findJava('Kafka tools', 17, config.javaHome, 'JAVA_HOME');
  const result = run(java.bin, [
    '-Xmx128m', '-cp', join(paths.kafkaLibDir, '*'), 'kafka.admin.ConfigCommand',
    '--bootstrap-server', `${SECURE_HOST}:${SECURE_PORTS.kafka}`, '--command-config', join(paths.configDir, 'admin-client.properties'),
    '--alter', '--add-config', `SCRAM-SHA-512=[iterations=4096,password=${password}]`, '--entity-type', 'users', '--entity-name', user,
  ]);
  if (result.status !== 0) throw new OutboxError('STACK_SERVICE_FAILED', `Rotating the SCRAM password of ${user} failed: ${result.output.trim().split('\n').slice(-3).join(' ')}`);
}
