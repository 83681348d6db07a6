import { join } from 'node:path';
import { PROJECT_ROOT } from '../stack/paths';

/**
 * The compiled files the bench runs as separate processes: the `outbox` CLI from dist/, the bench's own
 * children from build/scripts/ (`npm run build` makes both), also when the bench itself runs from
 * TypeScript sources (a test).
 */
export const DIST = {
  cli: join(PROJECT_ROOT, 'dist', 'cli', 'main.js'),
  writer: join(PROJECT_ROOT, 'build', 'scripts', 'bench', 'children', 'writer.js'),
  handlers: join(PROJECT_ROOT, 'build', 'scripts', 'bench', 'children', 'handlers.js'),
} as const;
