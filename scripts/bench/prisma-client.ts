/**
 * A Prisma 7 client for the Prisma adapter's tests and bench (scripts/bench/adapter-cases.ts,
 * test/integration/adapters-*.test.ts), generated from SCHEMA by Prisma's own `prisma generate` once
 * per schema and Prisma version, and loaded as JavaScript.
 *
 * Two things make it more than `prisma generate` (docs/adapters.md, "Prisma"):
 * - Prisma 7.10's CLI downloads its schema engine from Prisma's binary host before every `generate`,
 *   although the generator runs on the Wasm modules inside the `prisma` package and never starts the
 *   engine. That host is not reachable from this project's machines, so the engine's path is given as a
 *   stub (PRISMA_SCHEMA_ENGINE_BINARY) that fails loudly should `generate` ever run it.
 * - The `prisma-client` generator writes TypeScript only. The bench runs compiled JavaScript, so the files
 *   are transpiled (no type check: the generated files are `@ts-nocheck` anyway) and required.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/** The tables the tests and the bench write: the business row of every adapter case, and a handler's payment. */
const SCHEMA = `
generator client {
  provider            = "prisma-client"
  output              = "./client"
  moduleFormat        = "cjs"
  importFileExtension = ""
}

datasource db {
  provider = "postgresql"
}

model ShopOrder {
  id    String @id
  total Int
  @@map("shop_orders")
}

model Payment {
  orderId String @id @map("order_id")
  cents   Int
  @@map("payments")
}
`;

/** What the tests use of the generated module; the generated types themselves are not compiled here. */
export interface PrismaShopModule {
  PrismaClient: new (options: { adapter: unknown }) => PrismaShopClient;
  Prisma: { sql(strings: TemplateStringsArray, ...values: unknown[]): { text: string; values: unknown[] } };
}

export interface PrismaShopTransaction {
  shopOrder: { create(args: { data: { id: string; total: number } }): Promise<unknown> };
  payment: { create(args: { data: { orderId: string; cents: number } }): Promise<unknown> };
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<number>;
  /** On a transaction client too: a nested transaction (a savepoint). */
  $transaction<T>(fn: (tx: PrismaShopTransaction) => Promise<T>): Promise<T>;
}

export interface PrismaShopClient extends PrismaShopTransaction {
  $disconnect(): Promise<void>;
}

function transpileTree(dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) transpileTree(path);
    else if (name.endsWith('.ts')) {
      const { outputText } = ts.transpileModule(readFileSync(path, 'utf8'), { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true } });
      writeFileSync(path.replace(/\.ts$/, '.js'), outputText);
    }
  }
}

/**
 * Generates (first time only) and loads the client. It lives under node_modules/.cache so that the
 * generated code's `@prisma/client/runtime/client` resolves to the installed @prisma/client.
 */
export function loadPrismaClient(): PrismaShopModule {
  const prismaPackage = require.resolve('prisma/package.json');
  const version = (JSON.parse(readFileSync(prismaPackage, 'utf8')) as { version: string }).version;
  const key = createHash('sha256').update(`${version}\n${SCHEMA}`).digest('hex').slice(0, 16);
  const cache = join(dirname(dirname(prismaPackage)), '.cache', 'outbox-router-prisma');
  const target = join(cache, key);
  if (!existsSync(join(target, 'client', 'client.js'))) {
    mkdirSync(cache, { recursive: true });
    // Generated aside and renamed into place: two processes generating at once both end with a whole client.
    const work = mkdtempSync(join(cache, `${key}-`));
    try {
      writeFileSync(join(work, 'schema.prisma'), SCHEMA);
      const engineStub = join(work, 'schema-engine-stub');
      writeFileSync(engineStub, '#!/bin/sh\necho "outbox-router: prisma generate ran the schema engine, which this project cannot download" >&2\nexit 1\n');
      chmodSync(engineStub, 0o755);
      execFileSync(process.execPath, [join(dirname(prismaPackage), 'build', 'index.js'), 'generate', '--schema', join(work, 'schema.prisma')], {
        cwd: work,
        env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: engineStub, CHECKPOINT_DISABLE: '1', PRISMA_HIDE_UPDATE_MESSAGE: '1' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      transpileTree(join(work, 'client'));
      try {
        renameSync(work, target);
      } catch (error) {
        if (!existsSync(join(target, 'client', 'client.js'))) throw error;
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(join(target, 'client', 'client.js')) as PrismaShopModule;
}
