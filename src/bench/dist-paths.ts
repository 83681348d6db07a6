import { join } from 'node:path';
import { PROJECT_ROOT } from '../stack/paths';

/**
 * The compiled files the bench runs as separate processes. Always the built ones under dist/ (`npm run
 * build`), also when the bench itself runs from TypeScript sources (a test).
 */
export const DIST = {
  cli: join(PROJECT_ROOT, 'dist', 'cli', 'main.js'),
  writer: join(PROJECT_ROOT, 'dist', 'bench', 'children', 'writer.js'),
  handlers: join(PROJECT_ROOT, 'dist', 'bench', 'children', 'handlers.js'),
} as const;
