import type { Queryable } from "../db/db.ts";

const DAY_MS = 86_400_000;

/**
 * Folds at most `batchSize` paid operations recorded more than `retentionDays` ago
 * (CHAIN_OPERATION_RETENTION_DAYS) into their paymaster's totals (migration 033), oldest first
 * through the chain_operations_by_age index. The rows go and the totals grow in one statement, so
 * a crash leaves either both or neither. Rows with an unbilled reason stay: they are what the
 * chain parity lists for operators. Orphaned rows go without counting, as parity never counted
 * them (their reversal entries are in the ledger). Rows are taken with SKIP LOCKED, so instances
 * running this together share the work; a row another transaction deleted first is skipped by
 * the DELETE, so nothing is added twice. Returns how many rows it folded: fewer than `batchSize`
 * means done.
 *
 * A reorganisation never reaches days back, and the watcher never reads a range below its
 * cursor again, so nothing still needs the rows; settlement/store.ts still treats a log at or
 * below a paymaster's folded block as recorded.
 */
export async function foldOldChainOperations(
  db: Queryable,
  nowMs: number,
  retentionDays: number,
  batchSize: number,
): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `WITH old AS (
       SELECT chain_id, block_hash, log_index FROM chain_operations
       WHERE created_at < $1 AND unbilled_reason IS NULL AND billed = actual_gas_cost
       ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED),
     gone AS (
       DELETE FROM chain_operations c USING old
       WHERE c.chain_id = old.chain_id AND c.block_hash = old.block_hash AND c.log_index = old.log_index
       RETURNING c.chain_id, c.paymaster, c.block_number, c.orphaned_at, c.actual_gas_cost, c.billed),
     folded AS (
       INSERT INTO chain_operation_totals AS t
           (chain_id, paymaster, first_block, through_block, operations, paid, billed)
         SELECT chain_id, paymaster, min(block_number), max(block_number),
           count(*) FILTER (WHERE orphaned_at IS NULL),
           COALESCE(sum(actual_gas_cost) FILTER (WHERE orphaned_at IS NULL), 0),
           COALESCE(sum(billed) FILTER (WHERE orphaned_at IS NULL), 0)
         FROM gone GROUP BY chain_id, paymaster
       ON CONFLICT (chain_id, paymaster) DO UPDATE SET
         first_block = least(t.first_block, excluded.first_block),
         through_block = greatest(t.through_block, excluded.through_block),
         operations = t.operations + excluded.operations,
         paid = t.paid + excluded.paid,
         billed = t.billed + excluded.billed,
         updated_at = now())
     SELECT count(*)::text AS n FROM gone`,
    [new Date(nowMs - retentionDays * DAY_MS), batchSize],
  );
  return Number(rows[0]!.n);
}
