import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { OutboxError } from '../errors';
import type { ReaderSchemas } from '../codec';
import type { Handlers } from '../router';
import { HANDLERS_SHAPE, handlerProblems } from '../router/options';

/** A real dynamic import: TypeScript's CommonJS output would turn `import()` into `require()`. */
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

/** CommonJS through require (synchronous, works everywhere); an ES module (.mjs, or "type": "module") through import(). */
async function loadModule(file: string): Promise<unknown> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ERR_REQUIRE_ESM' && !file.endsWith('.mjs')) throw error;
  }
  return importModule(pathToFileURL(file).href);
}

export interface HandlerModule {
  handlers: Handlers;
  /** The module's named export `schemas` (beside a default export): the consumer's Avro reader schemas. */
  schemas?: ReaderSchemas;
}

/** Loads a handlers module: its default export (or the module itself) maps aggregate type → event type → handler. */
export async function loadHandlers(path: string): Promise<Handlers> {
  return (await loadHandlerModule(path)).handlers;
}

/** The handlers and, when the module declares them, its reader schemas (`export const schemas = { order: { OrderCreated: {...avsc} } }`). */
export async function loadHandlerModule(path: string): Promise<HandlerModule> {
  const file = resolve(path);
  let loaded: unknown;
  try {
    loaded = await loadModule(file);
  } catch (error) {
    throw new OutboxError('HANDLERS_INVALID', `Cannot load the handlers module ${file}: ${(error as Error).message}. Pass a compiled .js or .mjs file (--handlers dist/handlers.js).`, { cause: error });
  }
  const hasDefault = (loaded as { default?: unknown })?.default !== undefined;
  let exports = loaded as { default?: unknown; schemas?: unknown } | undefined;
  let handlers = exports?.default ?? loaded;
  // A CommonJS module compiled from `export default` and then imported as ESM: { default: { default: handlers } }.
  if (handlerProblems(handlers).length > 0 && (handlers as { default?: unknown })?.default) {
    exports = handlers as { default?: unknown; schemas?: unknown };
    handlers = exports.default;
  }
  const problems = handlerProblems(handlers);
  if (problems.length > 0) {
    throw new OutboxError('HANDLERS_INVALID', `The handlers module ${file} must export (default) ${HANDLERS_SHAPE}; found: ${problems.join(', ')}.`);
  }
  // Without a default export the module itself is the map, so a `schemas` key there is an aggregate type.
  const schemas = hasDefault ? exports?.schemas : undefined;
  if (schemas !== undefined && (schemas === null || typeof schemas !== 'object')) {
    throw new OutboxError('HANDLERS_INVALID', `The handlers module ${file} exports \`schemas\` as ${schemas === null ? 'null' : typeof schemas}; it must map aggregate type → event type → Avro schema (the .avsc JSON).`);
  }
  return { handlers: handlers as Handlers, schemas: schemas as ReaderSchemas | undefined };
}
