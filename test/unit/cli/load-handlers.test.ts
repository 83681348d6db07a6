import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHandlerModule, loadHandlers } from '../../../src/cli/load-handlers';
import { rejection } from '../../support/expect-error';

describe('loadHandlers (outbox router --handlers)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'handlers-'));

  it('loads a CommonJS module: its default export, or the module itself', async () => {
    const withDefault = join(dir, 'cjs-default.js');
    writeFileSync(withDefault, 'exports.default = { order: { OrderCreated: async () => {} } };\n');
    const plain = join(dir, 'cjs-plain.js');
    writeFileSync(plain, 'module.exports = { order: { OrderCreated: async () => {} } };\n');
    expect(Object.keys(await loadHandlers(withDefault))).toEqual(['order']);
    expect(Object.keys((await loadHandlers(plain)).order ?? {})).toEqual(['OrderCreated']);
  });

  it('refuses a module without handlers, naming the expected shape', async () => {
    const empty = join(dir, 'empty.js');
    writeFileSync(empty, 'module.exports = {};\n');
    const error = await rejection(loadHandlers(empty));
    expect(error.code).toBe('HANDLERS_INVALID');
    expect(error.message).toContain('must export (default)');
  });

  it('a missing module is HANDLERS_INVALID naming the file', async () => {
    const error = await rejection(loadHandlers(join(dir, 'nope.js')));
    expect(error.code).toBe('HANDLERS_INVALID');
    expect(error.message).toContain('nope.js');
  });

  it('takes the reader schemas from a `schemas` export beside the default export, not from a module without one', async () => {
    const withSchemas = join(dir, 'with-schemas.js');
    writeFileSync(withSchemas, 'exports.default = { order: { OrderCreated: async () => {} } };\nexports.schemas = { order: { OrderCreated: { type: "record", name: "OrderCreated", fields: [] } } };\n');
    const loaded = await loadHandlerModule(withSchemas);
    expect(Object.keys(loaded.handlers)).toEqual(['order']);
    expect(loaded.schemas).toEqual({ order: { OrderCreated: { type: 'record', name: 'OrderCreated', fields: [] } } });
    const plain = join(dir, 'plain-no-schemas.js');
    writeFileSync(plain, 'module.exports = { order: { OrderCreated: async () => {} } };\n');
    expect((await loadHandlerModule(plain)).schemas).toBeUndefined();
    const bad = join(dir, 'bad-schemas.js');
    writeFileSync(bad, 'exports.default = { order: { OrderCreated: async () => {} } };\nexports.schemas = "schemas/";\n');
    expect((await rejection(loadHandlerModule(bad))).code).toBe('HANDLERS_INVALID');
  });
});
