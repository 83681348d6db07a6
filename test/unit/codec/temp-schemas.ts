import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';

export const orderCreatedJson = () => JSON.parse(readFileSync(join(PROJECT_ROOT, 'schemas', 'order', 'OrderCreated.avsc'), 'utf8')) as { fields: Record<string, unknown>[] } & Record<string, unknown>;

/** A schemas folder in the OS temp dir: `{ 'order/OrderCreated': schemaObjectOrRawText }`. */
export function tempSchemas(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'outbox-schemas-'));
  for (const [name, content] of Object.entries(files)) {
    const file = join(dir, `${name}.avsc`);
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}
