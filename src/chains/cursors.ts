import type { EntryPointVersion } from "../config.ts";
import type { Queryable } from "../db/db.ts";

/**
 * Where each chain watcher has read up to (`chain_cursors`). `next_block` is the first block not
 * yet processed. A watcher writes it only after everything in the blocks before it has been
 * applied, so a crash in between makes the next run read those blocks again; every effect of a
 * block (settle, release, credit) is applied at most once, so reading twice is harmless.
 */
export type WatcherName = SettlementWatcherName | "deposits";

/**
 * One settlement watcher per live (EntryPoint, paymaster) pair of a chain, each with its own
 * cursor, remembered blocks and reorganisations (all keyed by this name). v0.7's keeps the name
 * it had before v0.8 existed, so a running deployment's cursor carries on.
 */
export type SettlementWatcherName = "settlement" | "settlement:0.8";

export function settlementWatcherName(version: EntryPointVersion): SettlementWatcherName {
  return version === "0.7" ? "settlement" : "settlement:0.8";
}

export async function readCursor(
  db: Queryable,
  chainId: number,
  watcher: WatcherName,
): Promise<bigint | null> {
  const rows = await db.query<{ next_block: string | number }>(
    "SELECT next_block FROM chain_cursors WHERE chain_id = $1 AND watcher = $2",
    [chainId, watcher],
  );
  return rows[0] ? BigInt(rows[0].next_block) : null;
}

/**
 * Moves the cursor forward, never back: several service instances may run the same watcher, and
 * one that finishes an older range late must not make the others read it again.
 */
export async function advanceCursor(
  db: Queryable,
  chainId: number,
  watcher: WatcherName,
  nextBlock: bigint,
): Promise<void> {
  await db.query(
    `INSERT INTO chain_cursors AS c (chain_id, watcher, next_block) VALUES ($1, $2, $3)
     ON CONFLICT (chain_id, watcher)
     DO UPDATE SET next_block = GREATEST(c.next_block, EXCLUDED.next_block), updated_at = now()`,
    [chainId, watcher, nextBlock.toString()],
  );
}

/**
 * Moves the cursor back to `nextBlock` (never forward): only a reconciled reorganisation does
 * this (applied-blocks.ts), so that the blocks that replaced the orphaned ones are read.
 */
export async function rewindCursor(
  db: Queryable,
  chainId: number,
  watcher: WatcherName,
  nextBlock: bigint,
): Promise<void> {
  await db.query(
    `UPDATE chain_cursors SET next_block = LEAST(next_block, $3::bigint), updated_at = now()
     WHERE chain_id = $1 AND watcher = $2`,
    [chainId, watcher, nextBlock.toString()],
  );
}
