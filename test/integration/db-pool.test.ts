import { loadConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { freshDatabase, withClient, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';

describe('createPool', () => {
  let db: FreshDatabase;

  beforeAll(async () => {
    db = await freshDatabase('pool');
  });

  afterAll(async () => {
    await db.drop();
  });

  it('survives an idle connection being terminated (a restart or DROP ... WITH (FORCE)), reports it, and keeps working', async () => {
    const errors: string[] = [];
    const pool = createPool(loadConfig({ env: {}, overrides: { database: { database: db.name } } }).database, { max: 2 }, (e) => errors.push((e as Error & { code?: string }).code ?? e.message));
    try {
      const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await withClient('postgres', (c) => c.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]));
      await until('a pool error', () => errors.length, (n) => n > 0, 10_000);
      expect(errors).toEqual(['57P01']);
      const again = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(again.rows[0]?.one).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it('survives the backend of a checked-out client being terminated between statements: the next statement fails, the process does not', async () => {
    const errors: string[] = [];
    const pool = createPool(loadConfig({ env: {}, overrides: { database: { database: db.name } } }).database, { max: 2 }, (e) => errors.push((e as Error & { code?: string }).code ?? e.message));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // Without a listener on the client this 'error' event is an uncaught exception: jest fails the run.
      await withClient('postgres', (c) => c.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]));
      await until('a pool error', () => errors.length, (n) => n > 0, 10_000);
      expect(errors).toContain('57P01'); // reported (then also the lost connection itself)
      await expect(client.query('SELECT 1')).rejects.toThrow();
      const again = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(again.rows[0]?.one).toBe(1);
    } finally {
      client.release(true);
      await pool.end();
    }
  });
});
