/**
 * `chain_operations`: every operation our paymaster paid on chain, and what a gas tank was
 * charged for it. This module is the table's only writer.
 *
 * Recording an operation and charging its tank happen in one transaction (the caller's, which
 * also remembers the operation's block for reorganisation checks), and the row's key is
 * the log's own identity (chain, block hash, log index), so a watcher that reads a range twice
 * (after a crash, or two instances at once) charges nothing twice. The row is inserted once,
 * after the billing, with what was billed: it is never updated but to mark it orphaned.
 */
import { bytes, bytesArray, hex } from "../db/bytes.ts";
import type { Db, Queryable } from "../db/db.ts";
import { type Billing, billOperation, reverseBilling } from "../ledger/ledger.ts";
import type { ChainOperation } from "./scan.ts";

export interface Recorded {
  op: ChainOperation;
  /** null when the operation had already been recorded. */
  billing: Billing | null;
  /** Wei the paymaster paid that no tank was charged for (0 when fully billed). */
  unbilledWei: bigint;
  reason: string | null;
}

export async function recordOperation(
  tx: Queryable,
  chainId: number,
  paymaster: string,
  op: ChainOperation,
): Promise<Recorded> {
  const key = [chainId, op.blockHash.toLowerCase(), op.logIndex] as const;
  // Recorded: its row is here, or its block is at or below what the retention job folded into the
  // paymaster's totals (migration 033), every log of which was recorded before it was folded.
  const seen = await tx.query(
    `SELECT 1 FROM chain_operations WHERE chain_id = $1 AND block_hash = ${bytes("$2")} AND log_index = $3
     UNION ALL
     SELECT 1 FROM chain_operation_totals
       WHERE chain_id = $1 AND paymaster = ${bytes("$4")} AND through_block >= $5`,
    [...key, paymaster, op.blockNumber.toString()],
    "settlement-seen",
  );
  if (seen.length > 0) return { op, billing: null, unbilledWei: 0n, reason: null };
  const billing: Billing = op.authId
    ? await billOperation(tx, {
        authId: op.authId.toLowerCase(),
        chainId,
        paymaster,
        outcome: op.success ? "success" : "reverted",
        actualGasUsed: op.actualGasUsed,
        actualGasCostWei: op.actualGasCostWei,
        txHash: op.txHash.toLowerCase(),
        userOpHash: op.userOpHash.toLowerCase(),
      })
    : { kind: "unbilled", projectId: null, reason: "no_authorization_log" };
  const billedWei = billing.kind === "unbilled" ? 0n : billing.billedWei;
  const unbilledWei = op.actualGasCostWei - billedWei;
  const reason = billing.kind === "unbilled" ? billing.reason : billing.shortfall;
  // One row, written once with its billing: no second version of it, and nothing for vacuum.
  const inserted = await tx.query(
    `INSERT INTO chain_operations (chain_id, block_hash, log_index, block_number, tx_hash, paymaster,
         user_op_hash, sender, auth_id, success, prefund_too_low, actual_gas_used, actual_gas_cost,
         billed, unbilled_reason, project_id)
       VALUES ($1, ${bytes("$2")}, $3, $4, ${bytes("$5")}, ${bytes("$6")}, ${bytes("$7")}, ${bytes("$8")},
         ${bytes("$9")}, $10, $11, $12, $13, $14, $15, $16)
       ON CONFLICT DO NOTHING RETURNING 1`,
    [
      ...key,
      op.blockNumber.toString(),
      op.txHash.toLowerCase(),
      paymaster,
      op.userOpHash.toLowerCase(),
      op.sender.toLowerCase(),
      op.authId?.toLowerCase() ?? null,
      op.success,
      op.prefundTooLow,
      op.actualGasUsed.toString(),
      op.actualGasCostWei.toString(),
      billedWei.toString(),
      reason,
      billing.projectId,
    ],
    "settlement-record",
  );
  if (inserted.length === 0) {
    // Another recorder committed the same log after the look above. Its billing locked the
    // authorization first, so ours found it settled and wrote nothing, unless it charged: then
    // this transaction must not commit (the caller's retry finds the operation recorded).
    if (billing.kind === "charged") throw new Error(`operation ${key.join(":")} was recorded concurrently`);
    return { op, billing: null, unbilledWei: 0n, reason: null };
  }
  return { op, billing, unbilledWei, reason };
}

/** What orphanOperations compensated for the given blocks, recounted from the table (crash-safe). */
export async function orphanedTotals(
  db: Queryable,
  chainId: number,
  blockHashes: string[],
): Promise<{ compensations: number; compensatedWei: bigint }> {
  const rows = await db.query<{ n: number; wei: string }>(
    `SELECT count(*)::int AS n, COALESCE(sum(billed), 0)::text AS wei FROM chain_operations
     WHERE chain_id = $1 AND block_hash = ANY(${bytesArray("$2")}) AND orphaned_at IS NOT NULL`,
    [chainId, blockHashes.map((h) => h.toLowerCase())],
  );
  return { compensations: rows[0]!.n, compensatedWei: BigInt(rows[0]!.wei) };
}

/**
 * Compensates every operation recorded from blocks a reorganisation removed: their charges go
 * back to the tanks through `reversal` entries and the rows are marked orphaned. Returns how many
 * were compensated; safe to repeat (references are unique and orphaned rows are skipped).
 */
export async function orphanOperations(db: Db, chainId: number, blockHashes: string[]): Promise<number> {
  if (blockHashes.length === 0) return 0;
  const lowered = blockHashes.map((h) => h.toLowerCase());
  const rows = await db.query<{ block_hash: string; log_index: number }>(
    `SELECT ${hex("block_hash")} AS block_hash, log_index FROM chain_operations
     WHERE chain_id = $1 AND block_hash = ANY(${bytesArray("$2")}) AND orphaned_at IS NULL`,
    [chainId, lowered],
  );
  let count = 0;
  for (const r of rows) {
    await db.transaction(async (tx) => {
      const locked = await tx.query<{ auth_id: string | null; project_id: string | null; billed: string }>(
        `UPDATE chain_operations SET orphaned_at = now()
         WHERE chain_id = $1 AND block_hash = ${bytes("$2")} AND log_index = $3 AND orphaned_at IS NULL
         RETURNING ${hex("auth_id")} AS auth_id, project_id, billed::text`,
        [chainId, r.block_hash, r.log_index],
      );
      const op = locked[0];
      if (!op) return;
      count++;
      if (op.auth_id && op.project_id && BigInt(op.billed) > 0n) {
        await reverseBilling(tx, {
          authId: op.auth_id,
          projectId: op.project_id,
          chainId,
          billedWei: BigInt(op.billed),
          reference: `reorg:${chainId}:${r.block_hash}:${r.log_index}`,
        });
      }
    });
  }
  return count;
}

export interface PaidTotals {
  fromBlock: bigint | null;
  throughBlock: bigint | null;
  operations: number;
  paidWei: bigint;
  billedWei: bigint;
  unattributedWei: bigint;
  unattributedCount: number;
}

/**
 * What the paymaster paid on chain and what tanks were charged, from a block on (orphans
 * excluded): the folded totals (migration 033) plus the rows still kept. Old rows are folded
 * whole, so a `fromBlock` inside the folded range cannot be answered as asked: the count then
 * starts after the folded range and `fromBlock` in the answer says so. Without a `fromBlock`, or
 * with one at or before the first folded block, it is the whole history.
 */
export async function paidTotals(
  db: Queryable,
  chainId: number,
  paymaster: string,
  fromBlock: bigint | null,
): Promise<PaidTotals> {
  const rows = await db.query<{
    folded_from: string | null;
    folded_through: string | null;
    folded_n: string;
    folded_paid: string;
    folded_billed: string;
  }>(
    `SELECT first_block::text AS folded_from, through_block::text AS folded_through,
       operations::text AS folded_n, paid::text AS folded_paid, billed::text AS folded_billed
     FROM chain_operation_totals WHERE chain_id = $1 AND paymaster = ${bytes("$2")}`,
    [chainId, paymaster],
  );
  const folded = rows[0];
  const foldedFrom = folded?.folded_from == null ? null : BigInt(folded.folded_from);
  const foldedThrough = folded?.folded_through == null ? null : BigInt(folded.folded_through);
  // Whether the folded totals count, and from which block the kept rows do.
  const wholeHistory = foldedFrom === null || fromBlock === null || fromBlock <= foldedFrom;
  const rowsFrom =
    foldedThrough !== null && !wholeHistory && fromBlock !== null && fromBlock <= foldedThrough
      ? foldedThrough + 1n
      : (fromBlock ?? 0n);
  const kept = await db.query<{
    n: number;
    paid: string;
    billed: string;
    unbilled_n: number;
    first_block: string | null;
    last_block: string | null;
  }>(
    `SELECT count(*)::int AS n, COALESCE(sum(actual_gas_cost), 0)::text AS paid,
       COALESCE(sum(billed), 0)::text AS billed,
       count(*) FILTER (WHERE billed < actual_gas_cost)::int AS unbilled_n,
       min(block_number)::text AS first_block, max(block_number)::text AS last_block
     FROM chain_operations
     WHERE chain_id = $1 AND paymaster = ${bytes("$2")} AND orphaned_at IS NULL AND block_number >= $3`,
    [chainId, paymaster, (wholeHistory ? (fromBlock ?? 0n) : rowsFrom).toString()],
  );
  const r = kept[0]!;
  const withFolded = wholeHistory && folded !== undefined;
  const paidWei = BigInt(r.paid) + (withFolded ? BigInt(folded.folded_paid) : 0n);
  const billedWei = BigInt(r.billed) + (withFolded ? BigInt(folded.folded_billed) : 0n);
  const firstKept = r.first_block === null ? null : BigInt(r.first_block);
  const lastKept = r.last_block === null ? null : BigInt(r.last_block);
  const first =
    withFolded && foldedFrom !== null && (firstKept === null || foldedFrom < firstKept)
      ? foldedFrom
      : firstKept;
  const last =
    withFolded && foldedThrough !== null && (lastKept === null || foldedThrough > lastKept)
      ? foldedThrough
      : lastKept;
  return {
    fromBlock: wholeHistory ? (fromBlock ?? first) : rowsFrom,
    throughBlock: last,
    operations: r.n + (withFolded ? Number(folded.folded_n) : 0),
    paidWei,
    billedWei,
    unattributedWei: paidWei - billedWei,
    // Folded rows were all fully billed.
    unattributedCount: r.unbilled_n,
  };
}

export interface UnattributedOperation {
  txHash: string;
  userOpHash: string;
  blockNumber: string;
  authId: string | null;
  projectId: string | null;
  actualGasCost: string;
  billed: string;
  reason: string;
}

/** The most recent operations not (fully) charged to a tank, newest first. */
export async function recentUnattributed(
  db: Queryable,
  chainId: number,
  limit: number,
): Promise<UnattributedOperation[]> {
  const rows = await db.query<{
    tx_hash: string;
    user_op_hash: string;
    block_number: string;
    auth_id: string | null;
    project_id: string | null;
    actual_gas_cost: string;
    billed: string;
    unbilled_reason: string;
  }>(
    `SELECT ${hex("tx_hash")} AS tx_hash, ${hex("user_op_hash")} AS user_op_hash, block_number::text,
       ${hex("auth_id")} AS auth_id, project_id, actual_gas_cost::text,
       billed::text, unbilled_reason
     FROM chain_operations
     WHERE chain_id = $1 AND unbilled_reason IS NOT NULL AND orphaned_at IS NULL
     ORDER BY block_number DESC, log_index DESC LIMIT $2`,
    [chainId, limit],
  );
  return rows.map((r) => ({
    txHash: r.tx_hash,
    userOpHash: r.user_op_hash,
    blockNumber: r.block_number,
    authId: r.auth_id,
    projectId: r.project_id,
    actualGasCost: r.actual_gas_cost,
    billed: r.billed,
    reason: r.unbilled_reason,
  }));
}
