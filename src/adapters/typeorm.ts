import type { EntityManager, QueryRunner } from 'typeorm';
import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * TypeORM (docs/adapters.md): the writer in a TypeORM transaction, through its EntityManager or
 * QueryRunner. Needs nothing of TypeORM at run time but the handle it is given.
 */

const HINT = 'Call it inside dataSource.transaction(async (manager) => …) with that manager, or with a QueryRunner after startTransaction().';

function isQueryRunner(handle: EntityManager | QueryRunner): handle is QueryRunner {
  return typeof (handle as QueryRunner)?.startTransaction === 'function';
}

function typeormExecutor(handle: EntityManager | QueryRunner): OutboxExecutor {
  // A transaction's EntityManager runs its queries on its QueryRunner; the default manager has none.
  const runner = isQueryRunner(handle) ? handle : handle?.queryRunner;
  return {
    library: 'TypeORM',
    hint: HINT,
    query: (text, values) => (runner ?? handle).query(text, [...values]),
    transactionState() {
      if (!runner) return 'none';
      if (runner.isReleased) return 'ended';
      return runner.isTransactionActive ? 'open' : 'none';
    },
  };
}

/** The writer through TypeORM: `await outbox.writeEvent(manager, event)` inside `dataSource.transaction(async (manager) => …)`. */
export function createTypeormWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<EntityManager | QueryRunner, E> {
  return bindWriter(writer, typeormExecutor);
}
