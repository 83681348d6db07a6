/**
 * The library apart from the development harness, and a package users can import:
 * - src/ (the library) never imports scripts/, examples/ or test/; scripts/ and examples/ import the
 *   library only as `outbox-router` or `outbox-router/<part>`, a subpath of the `exports` map; scripts/
 *   has no import cycles;
 * - every `exports` target is built, and importing the writer (`outbox-router/producer`, resolved through
 *   the exports map as a user's code resolves it) loads neither Kafka, the harness nor progress bars;
 * - the packed package (`npm pack --dry-run`) holds no harness and no dist file without a source in src/.
 * The last two need dist/ (`npm run build`, which `npm test` runs first); they build it when it is missing.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = resolve(__dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | { types: string; default: string }>;
  files: string[];
  scripts: Record<string, string>;
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Every module specifier of a TypeScript file: static imports and re-exports, `import()`, `require()`. */
export function specifiers(source: string): string[] {
  const out: string[] = [];
  const patterns = [/\b(?:import|export)\s[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g, /\bimport\s*['"]([^'"]+)['"]/g, /\b(?:import|require)\s*\(\s*['"]([^'"]+)['"]\s*\)/g];
  for (const pattern of patterns) for (const m of source.matchAll(pattern)) out.push(m[1] as string);
  return out;
}

/** Where a relative specifier points, as a path relative to the repository. */
function target(file: string, specifier: string): string {
  return relative(root, resolve(dirname(file), specifier));
}

const subpaths = Object.keys(pkg.exports).filter((k) => k !== './package.json');
const publicSpecifiers = new Set(subpaths.map((k) => (k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`)));

describe('layout: the library apart from the harness', () => {
  it('finds the specifiers of every import form', () => {
    const source = "import a from './a';\nimport type { B } from \"../b\";\nexport { c } from './c';\nimport './d';\nconst e = await import('./e');\nconst f = require('./f');\nimport {\n  g,\n} from 'g';";
    expect(specifiers(source).sort()).toEqual(['../b', './a', './c', './d', './e', './f', 'g']);
  });

  it('src/ never imports scripts/, examples/ or test/, nor itself as a package', () => {
    const offences: string[] = [];
    for (const file of tsFiles(join(root, 'src'))) {
      for (const s of specifiers(readFileSync(file, 'utf8'))) {
        if (s === pkg.name || s.startsWith(`${pkg.name}/`)) offences.push(`${relative(root, file)}: ${s}`);
        // package.json: the CLI reads its version from it.
        else if (s.startsWith('.') && !target(file, s).startsWith('src/') && target(file, s) !== 'package.json') offences.push(`${relative(root, file)}: ${s} (${target(file, s)})`);
      }
    }
    expect(offences).toEqual([]);
  });

  it('scripts/ and examples/ reach the library only through its public entry points', () => {
    const offences: string[] = [];
    for (const file of [...tsFiles(join(root, 'scripts')), ...tsFiles(join(root, 'examples'))]) {
      for (const s of specifiers(readFileSync(file, 'utf8'))) {
        const inPackage = s === pkg.name || s.startsWith(`${pkg.name}/`);
        if (inPackage && !publicSpecifiers.has(s)) offences.push(`${relative(root, file)}: ${s} is not in the exports map`);
        if (s.startsWith('.') && /^(src|dist|test)(\/|$)/.test(target(file, s))) offences.push(`${relative(root, file)}: ${s} (${target(file, s)})`);
      }
    }
    expect(offences).toEqual([]);
    // examples/ is what a user copies: it does not lean on the harness either.
    for (const file of tsFiles(join(root, 'examples'))) {
      for (const s of specifiers(readFileSync(file, 'utf8'))) expect(s.startsWith('.') ? target(file, s) : s).not.toMatch(/^scripts/);
    }
  });

  it('scripts/ has no import cycles (types live beside the orchestrators, not inside them)', () => {
    const files = new Set(tsFiles(join(root, 'scripts')));
    const resolveLocal = (from: string, s: string): string | undefined =>
      [`${resolve(dirname(from), s)}.ts`, join(resolve(dirname(from), s), 'index.ts')].find((f) => files.has(f));
    const edges = new Map([...files].map((f) => [f, specifiers(readFileSync(f, 'utf8')).filter((s) => s.startsWith('.')).flatMap((s) => resolveLocal(f, s) ?? [])]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...path.slice(path.indexOf(file)), file].map((f) => relative(root, f)).join(' → '));
        return;
      }
      state.set(file, 'open');
      for (const next of edges.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it('offers the parts the design names as subpaths, each with types, mapped to src/ for tests and typecheck', () => {
    for (const part of ['.', './producer', './router', './relay', './watchdog', './codec', './connector', './package.json']) expect(Object.keys(pkg.exports)).toContain(part);
    const tsconfig = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')) as { compilerOptions: { paths: Record<string, string[]> } };
    for (const key of subpaths) {
      const entry = pkg.exports[key] as { types: string; default: string };
      expect(entry.default).toMatch(/^\.\/dist\/.+\.js$/);
      expect(entry.types).toBe(entry.default.replace(/\.js$/, '.d.ts'));
      // The source behind it exists (tsconfig's paths and jest's moduleNameMapper point there).
      const source = entry.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');
      expect(existsSync(join(root, source))).toBe(true);
      const specifier = key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`;
      const mapped = tsconfig.compilerOptions.paths[specifier] ?? tsconfig.compilerOptions.paths[`${pkg.name}/*`]?.map((p) => p.replace('*', key.slice(2)));
      expect(mapped?.map((p) => p.replace(/^\.\//, ''))).toEqual([source]);
    }
    expect(pkg.files.filter((f) => /^(scripts|build|examples|test)\b/.test(f))).toEqual([]);
  });

  it('keeps the npm script names, now running the compiled harness', () => {
    for (const name of ['stack:up', 'stack:down', 'stack:status', 'stack:logs', 'demo', 'bench']) expect(pkg.scripts[name]).toMatch(/node build\/scripts\/cli\.js /);
    expect(pkg.scripts['test:chaos']).toMatch(/node build\/scripts\/chaos\/main\.js/);
    expect(pkg.scripts.build).toContain('tsconfig.scripts.json');
  });
});

describe('layout: the built package', () => {
  beforeAll(() => {
    if (!existsSync(join(root, 'dist', 'producer', 'index.js'))) execFileSync('npm', ['run', '-s', 'build'], { cwd: root, stdio: 'ignore' });
  }, 180_000);

  it('builds every target of the exports map', () => {
    for (const key of subpaths) {
      const entry = pkg.exports[key] as { types: string; default: string };
      expect([key, existsSync(join(root, entry.default)), existsSync(join(root, entry.types))]).toEqual([key, true, true]);
    }
  });

  it.each([
    ['kysely', 'kysely'],
    ['drizzle', 'drizzle-orm'],
    ['knex', 'knex'],
    ['postgres-js', undefined],
    ['typeorm', undefined],
    ['sequelize', undefined],
    ['prisma', undefined],
    ['pg-promise', undefined],
  ])('the %s adapter loads only its own library (or none), never another ORM or Kafka', (subpath, own) => {
    const script = `require('${pkg.name}/${subpath}'); process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' })) as string[];
    const libraries = new Set(loaded.flatMap((f) => /[\\/]node_modules[\\/](kysely|drizzle-orm|knex|postgres|typeorm|sequelize|@prisma|prisma|pg-promise|kafkajs)[\\/]/.exec(f)?.[1] ?? []));
    expect([...libraries]).toEqual(own ? [own] : []);
    expect(loaded.some((f) => relative(root, f) === join('dist', 'adapters', `${subpath}.js`))).toBe(true);
  });

  it('importing the writer (outbox-router/producer) loads neither Kafka, the harness nor progress bars', () => {
    // A child process, so jest's module registry plays no part: Node resolves the subpath through the exports map.
    const script = `
      const resolved = require.resolve('${pkg.name}/producer');
      const { createOutboxWriter } = require('${pkg.name}/producer');
      process.stdout.write(JSON.stringify({ resolved, writer: typeof createOutboxWriter, loaded: Object.keys(require.cache) }));`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' })) as { resolved: string; writer: string; loaded: string[] };
    expect(relative(root, out.resolved)).toBe(join('dist', 'producer', 'index.js'));
    expect(out.writer).toBe('function');
    const forbidden = out.loaded.filter((f) => /[\\/]node_modules[\\/](kafkajs|cli-progress|cli-table3|@kafkajs)[\\/]/.test(f) || /^(scripts|build|examples|src)[\\/]/.test(relative(root, f)));
    expect(forbidden).toEqual([]);
    // It did load the writer itself: the check above is not vacuous.
    expect(out.loaded.some((f) => relative(root, f) === join('dist', 'producer', 'writer.js'))).toBe(true);
  });

  it('packs no harness: every dist file has its source in src/, and nothing of scripts/, build/, examples/ or test/', () => {
    // --ignore-scripts: the prepack script would rebuild dist/ under the feet of the other tests.
    const [report] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as Array<{ files: Array<{ path: string }> }>;
    const paths = (report?.files ?? []).map((f) => f.path);
    expect(paths).toContain('dist/producer/index.js');
    expect(paths.filter((p) => /^(scripts|build|examples|test)\//.test(p))).toEqual([]);
    const orphans = paths
      .filter((p) => p.startsWith('dist/'))
      .filter((p) => !existsSync(join(root, p.replace(/^dist\//, 'src/').replace(/(\.d\.ts|\.js)(\.map)?$/, '.ts'))));
    // An orphan is output of a source that moved or was deleted: `rm -rf dist build && npm run build`.
    expect(orphans).toEqual([]);
  });
});
