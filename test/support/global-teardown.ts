import { stopComposeStack } from './containers';

/** The native stack is left running for the next run (CI's .ci/run stops it); containers are removed. */
export default async function globalTeardown(): Promise<void> {
  if (process.env.STACK === 'containers') await stopComposeStack();
}
