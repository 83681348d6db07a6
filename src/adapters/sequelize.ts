import type { Sequelize, Transaction } from 'sequelize';
import { bindWriter, type ExecutorWriter, type OutboxExecutor, type TransactionWriter } from '../producer/executor';

/**
 * Sequelize (docs/adapters.md): the writer in a Sequelize transaction, given as the Transaction object
 * the way Sequelize's own queries take it. Needs nothing of Sequelize at run time but that object.
 */

const HINT = 'Pass the Transaction of sequelize.transaction(async (t) => …), or of const t = await sequelize.transaction() before t.commit().';

function sequelizeExecutor(handle: Transaction): OutboxExecutor {
  // Every Transaction knows the Sequelize instance that made it; its queries join it with { transaction }.
  const owner = (handle as Transaction & { sequelize?: Sequelize })?.sequelize;
  return {
    library: 'Sequelize',
    hint: HINT,
    query: async (text, values) => (owner as Sequelize).query(text, { bind: [...values], transaction: handle, raw: true }),
    transactionState() {
      if (!owner || typeof owner.query !== 'function') return 'none';
      return (handle as Transaction & { finished?: string }).finished ? 'ended' : 'open';
    },
  };
}

/** The writer through Sequelize: `await outbox.writeEvent(t, event)` with the Transaction `t`. */
export function createSequelizeWriter<E>(writer: ExecutorWriter<E>): TransactionWriter<Transaction, E> {
  return bindWriter(writer, sequelizeExecutor);
}
