/**
 * Reorganisations deeper than the confirmation depth: noticed, recorded, reconciled.
 *
 * The watchers read only blocks `confirmations` below the head, so a shallower reorganisation
 * never reaches them. A deeper one replaces blocks whose effects (credits, settlements) were
 * already applied. To notice it, each watcher remembers the hash of the blocks it applied
 * (`chain_applied_blocks`) and, before each tick, compares them with the chain (`findReorg`).
 * What it finds is recorded in `chain_reorgs`, reported by readiness, the logs and the parity
 * report, and reconciled by the watcher with compensating ledger entries.
 *
 * The contract for a watcher (the deposit watcher in funding/deposit-watcher.ts is the model):
 *
 * 1. Start of every tick: finish the open reorganisation if there is one (`openReorg`), else look
 *    for a new one (`findReorg`) and record it (`recordReorg`, which logs it at error level).
 *    Compensate every effect applied from `orphaned` blocks, each in one transaction keyed by a
 *    unique reference (so a crash and a repeat never compensate twice), then `markReconciled`
 *    with a summary. Reconciling forgets the orphaned blocks and moves the watcher's cursor back to
 *    `forkBlock`, so the blocks that replaced them are read next. Until then, do not scan.
 * 2. Before reading a range, take `reorgEpoch`. Every transaction that applies an effect from that
 *    range, and the one that moves the cursor past it, runs through `applyEffects` (or calls
 *    `assertEpoch` and `remember` itself). A range read by another instance while a reorganisation
 *    was being recorded or reconciled is then refused instead of applied: its blocks may be gone,
 *    or the cursor it would move may just have been moved back.
 * 3. Remember, in the same transaction as the effect, the block of every applied effect, and with
 *    the cursor at least the last block of the range. An effect whose block was not remembered
 *    atomically with it could be orphaned unnoticed. Between two remembered blocks the fork can
 *    only be placed at the lower one, so a watcher that has every header of its range at hand
 *    (the deposit watcher) remembers them all: its fork block and depth are then exact.
 * 4. The hashes given to `remember` must come from one view of the chain, so that "this block is
 *    still canonical" implies "every remembered block below it is": that is what lets `findReorg`
 *    binary-search. A watcher that reads whole blocks checks their parent links (`assertLinked`,
 *    also against the remembered block before the range). A watcher that reads logs takes the
 *    hashes from the logs, then reads the range's last header, then each effect block's header,
 *    and refuses the range if one differs from its logs (a reorganisation during the read).
 *
 * Retention: rows more than `retainBlocks` below a watcher's newest row are pruned on every
 * `remember` that prunes (each range's commit does; default DEFAULT_RETAIN_BLOCKS, so at most that
 * many rows per chain and watcher, and a range's blocks more until its commit). A
 * reorganisation reaching below the window is still noticed when a remembered block inside it
 * changed, and is flagged `beyondMemory`; effects older than the window are no longer checked.
 * The window must be much larger than any range a watcher applies.
 *
 * Cost: `findReorg` reads one row and one header when nothing changed (the newest remembered
 * block), and the watcher's rows and about log2(rows) more headers to find the fork when
 * something did.
 */
import assert from "node:assert/strict";
import type { Hex } from "viem";
import type { Db, Queryable } from "../db/db.ts";
import type { ReadinessProbe } from "../health/readiness.ts";
import { rewindCursor, type WatcherName } from "./cursors.ts";
import { silentLog, type WatcherLog } from "./poll-loop.ts";
import type { ChainClient } from "./rpc.ts";

/** Blocks kept below a watcher's newest remembered block: 33 h of 12-second blocks, less on faster chains. */
export const DEFAULT_RETAIN_BLOCKS = 10_000n;

export interface AppliedBlock {
  number: bigint;
  hash: Hex;
}

export interface BlockHeader extends AppliedBlock {
  parentHash: Hex;
}

/** What `findReorg` saw: the remembered blocks the chain no longer has. */
export interface Reorg {
  /** The first block to read again: one past the newest remembered block that is still canonical. */
  forkBlock: bigint;
  /**
   * Blocks from `forkBlock` through the chain's head when it was seen (or the newest remembered
   * block, if higher): at least as many as were replaced, since the fork lies at or above
   * `forkBlock`, and at most one remembered gap more.
   */
  depth: bigint;
  /** The remembered blocks that were replaced, oldest first. */
  orphaned: AppliedBlock[];
  /** No remembered block survived: the fork may lie below the retention window. */
  beyondMemory: boolean;
}

/** What a watcher's compensation did, stored with the reorganisation when it is reconciled. */
export interface ReorgSummary {
  /** Effects undone (credits taken back, charges given back). */
  compensations: number;
  /** Wei moved by the compensating entries, in absolute value. */
  compensatedWei: bigint;
  /** What could not be taken back because the tank had spent it: a debt per project. */
  shortfalls: { projectId: string; shortfallWei: bigint }[];
}

export interface ChainReorg extends Reorg {
  id: number;
  chainId: number;
  watcher: WatcherName;
  detectedAt: string;
  reconciledAt: string | null;
  /** Null until reconciled. */
  summary: (ReorgSummary & { shortfallWei: bigint }) | null;
}

/** The chain changed while a range was being read, or since its epoch: the range is refused. */
export class StaleRangeError extends Error {
  override name = "StaleRangeError";
}

// ---------------------------------------------------------------------------------------------
// Remembering

/**
 * Remembers that `watcher` applied these blocks, then prunes rows older than the retention
 * window (unless `prune` is false: the settlement watcher prunes once per range, when its cursor
 * moves, not in each operation's transaction). A block number already remembered under another
 * hash means the chain changed under a range being applied: that throws (rolling back the
 * caller's transaction) instead of overwriting.
 */
export async function remember(
  q: Queryable,
  chainId: number,
  watcher: WatcherName,
  blocks: AppliedBlock[],
  options: { retainBlocks?: bigint; prune?: boolean } = {},
): Promise<void> {
  const retain = options.retainBlocks ?? DEFAULT_RETAIN_BLOCKS;
  assert.ok(retain > 0n, "the retention window must hold at least one block");
  const unique = new Map<bigint, string>();
  for (const b of blocks) {
    const hash = b.hash.toLowerCase();
    const seen = unique.get(b.number);
    if (seen !== undefined && seen !== hash)
      throw new StaleRangeError(`block ${b.number}: two hashes in one range`);
    unique.set(b.number, hash);
  }
  if (unique.size === 0) return;
  const rows = await q.query<{ block_number: string; block_hash: string }>(
    `INSERT INTO chain_applied_blocks AS a (chain_id, watcher, block_number, block_hash)
     SELECT $1, $2, x.n::bigint, x.h FROM unnest($3::text[], $4::text[]) AS x(n, h)
     ON CONFLICT (chain_id, watcher, block_number) DO UPDATE SET applied_at = now()
     RETURNING block_number::text, block_hash`,
    [chainId, watcher, [...unique.keys()].map(String), [...unique.values()]],
    "watcher-remember",
  );
  for (const r of rows) {
    if (r.block_hash !== unique.get(BigInt(r.block_number)))
      throw new StaleRangeError(
        `block ${r.block_number} was applied as ${r.block_hash}, the range read has ${unique.get(BigInt(r.block_number))}`,
      );
  }
  if (options.prune === false) return;
  await q.query(
    `DELETE FROM chain_applied_blocks WHERE chain_id = $1 AND watcher = $2 AND block_number <
       (SELECT max(block_number) FROM chain_applied_blocks WHERE chain_id = $1 AND watcher = $2) - $3::bigint`,
    [chainId, watcher, retain.toString()],
    "watcher-forget",
  );
}

/** The remembered hash of one block, if the watcher remembered it. */
export async function rememberedHash(
  q: Queryable,
  chainId: number,
  watcher: WatcherName,
  blockNumber: bigint,
): Promise<Hex | null> {
  const rows = await q.query<{ block_hash: Hex }>(
    "SELECT block_hash FROM chain_applied_blocks WHERE chain_id = $1 AND watcher = $2 AND block_number = $3",
    [chainId, watcher, blockNumber.toString()],
  );
  return rows[0]?.block_hash ?? null;
}

async function rememberedBlocks(
  q: Queryable,
  chainId: number,
  watcher: WatcherName,
): Promise<AppliedBlock[]> {
  const rows = await q.query<{ block_number: string; block_hash: Hex }>(
    // Ordered by the table's bigint column, not by the text the select list makes of it.
    `SELECT a.block_number::text AS block_number, a.block_hash FROM chain_applied_blocks a
     WHERE a.chain_id = $1 AND a.watcher = $2 ORDER BY a.block_number`,
    [chainId, watcher],
  );
  return rows.map((r) => ({ number: BigInt(r.block_number), hash: r.block_hash }));
}

/**
 * Pure: checks that headers read for one range form one chain, in order, and that the first
 * continues `previousHash` (the remembered block before the range) when it is known.
 */
export function assertLinked(headers: BlockHeader[], previousHash: Hex | null): void {
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i]!;
    const parent = i === 0 ? previousHash : headers[i - 1]!.hash;
    if (i > 0) assert.equal(h.number, headers[i - 1]!.number + 1n, "headers of a range come in order");
    if (parent !== null && h.parentHash.toLowerCase() !== parent.toLowerCase())
      throw new StaleRangeError(
        `block ${h.number} does not continue ${parent}: the chain changed during the read`,
      );
  }
}

// ---------------------------------------------------------------------------------------------
// Finding

/**
 * Compares the watcher's remembered blocks with the chain. Null when the newest remembered block
 * the RPC has is unchanged (one request); otherwise binary-searches for the newest one still
 * canonical. Blocks the RPC does not have yet (a node behind its peers) are not judged.
 */
export async function findReorg(
  db: Queryable,
  client: Pick<ChainClient, "getBlock" | "getBlockNumber">,
  chainId: number,
  watcher: WatcherName,
  options: { latestBlock?: bigint } = {},
): Promise<Reorg | null> {
  const latest = options.latestBlock ?? (await client.getBlockNumber());
  const judged = new Map<bigint, boolean>();
  const isCanonical = async (b: AppliedBlock) => {
    let same = judged.get(b.number);
    if (same === undefined) {
      const onChain = await client.getBlock({ blockNumber: b.number });
      same = onChain.hash?.toLowerCase() === b.hash.toLowerCase();
      judged.set(b.number, same);
    }
    return same;
  };
  // The common case reads one row and one header; the whole memory only when something changed.
  const [newest] = await db.query<{ block_number: string; block_hash: Hex }>(
    `SELECT a.block_number::text AS block_number, a.block_hash FROM chain_applied_blocks a
     WHERE a.chain_id = $1 AND a.watcher = $2 AND a.block_number <= $3 ORDER BY a.block_number DESC LIMIT 1`,
    [chainId, watcher, latest.toString()],
  );
  if (!newest || (await isCanonical({ number: BigInt(newest.block_number), hash: newest.block_hash })))
    return null;
  return locateFork(await rememberedBlocks(db, chainId, watcher), latest, isCanonical);
}

/**
 * Pure apart from `isCanonical`: finds the first replaced block among `remembered` (ascending),
 * judging only blocks at or below `latest`. Relies on contract point 4: if a remembered block is
 * canonical, so is every remembered block below it.
 */
export async function locateFork(
  remembered: AppliedBlock[],
  latest: bigint,
  isCanonical: (b: AppliedBlock) => Promise<boolean>,
): Promise<Reorg | null> {
  let top = remembered.length - 1;
  while (top >= 0 && remembered[top]!.number > latest) top--;
  if (top < 0 || (await isCanonical(remembered[top]!))) return null;
  // Invariant: remembered[lo] is canonical (or lo = -1), remembered[hi] is not.
  let lo = -1;
  let hi = top;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (await isCanonical(remembered[mid]!)) lo = mid;
    else hi = mid;
  }
  // Everything remembered above a replaced block was built on it, so it is gone too.
  const orphaned = remembered.slice(hi);
  const forkBlock = lo >= 0 ? remembered[lo]!.number + 1n : remembered[0]!.number;
  const newest = remembered[remembered.length - 1]!.number;
  const highest = newest > latest ? newest : latest;
  return { forkBlock, depth: highest - forkBlock + 1n, orphaned, beyondMemory: lo < 0 };
}

// ---------------------------------------------------------------------------------------------
// Epochs: a range read before a reorganisation was recorded or reconciled is not applied

/**
 * Serialises recording and reconciling (exclusive) against applying ranges (shared, taken by
 * assertEpoch through db/functions/watcher_epoch_locked.sql), per watcher. An advisory lock with
 * two int4 keys, which never meets the migration lock's single bigint key.
 */
async function lockWatcher(tx: Queryable, chainId: number, watcher: WatcherName) {
  await tx.query("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [chainId, watcher]);
}

/** Changes whenever a reorganisation of the watcher is recorded or reconciled. */
export async function reorgEpoch(q: Queryable, chainId: number, watcher: WatcherName): Promise<bigint> {
  const rows = await q.query<{ epoch: string }>(
    `SELECT (count(*) + count(reconciled_at))::text AS epoch FROM chain_reorgs
     WHERE chain_id = $1 AND watcher = $2`,
    [chainId, watcher],
  );
  return BigInt(rows[0]?.epoch ?? "0");
}

/** Inside a transaction: refuses (StaleRangeError) when the epoch moved since the range was read. */
export async function assertEpoch(tx: Queryable, chainId: number, watcher: WatcherName, epoch: bigint) {
  // The shared lock and the epoch read after it, in one call (db/functions/watcher_epoch_locked.sql).
  const [row] = await tx.query<{ epoch: string }>(
    "SELECT watcher_epoch_locked($1::integer, $2)::text AS epoch",
    [chainId, watcher],
    "watcher-epoch",
  );
  const now = BigInt(row!.epoch);
  if (now !== epoch)
    throw new StaleRangeError(
      `a reorganisation was recorded or reconciled since the range was read (epoch ${epoch} → ${now})`,
    );
}

export interface WatcherScope {
  chainId: number;
  watcher: WatcherName;
  /** `reorgEpoch` taken before the range was read. */
  epoch: bigint;
  retainBlocks?: bigint;
  /** Whether this transaction prunes the remembered blocks past the window (remember); default true. */
  prune?: boolean;
}

/**
 * Applies effects read from a range in one transaction: checks the epoch, runs `apply`, and
 * remembers `blocks` (the blocks the effects came from, or the range's last block).
 */
export async function applyEffects<T>(
  db: Db,
  scope: WatcherScope,
  blocks: AppliedBlock[],
  apply: (tx: Queryable) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    await assertEpoch(tx, scope.chainId, scope.watcher, scope.epoch);
    const result = await apply(tx);
    await remember(tx, scope.chainId, scope.watcher, blocks, {
      retainBlocks: scope.retainBlocks,
      prune: scope.prune,
    });
    return result;
  });
}

// ---------------------------------------------------------------------------------------------
// Recording and reconciling

interface ReorgRow {
  id: string;
  chain_id: number;
  watcher: string;
  fork_block: string;
  depth: string;
  orphaned: { number: string; hash: Hex }[] | string;
  beyond_memory: boolean;
  detected_at: Date;
  reconciled_at: Date | null;
  compensations: number | null;
  compensated_wei: string | null;
  shortfall_wei: string | null;
  shortfalls: { projectId: string; shortfallWei: string }[] | string | null;
}

const REORG_COLUMNS = `id::text, chain_id, watcher, fork_block::text, depth::text, orphaned, beyond_memory,
  detected_at, reconciled_at, compensations, compensated_wei::text, shortfall_wei::text, shortfalls`;

function parseJson<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}

function toChainReorg(r: ReorgRow): ChainReorg {
  const orphaned = parseJson(r.orphaned).map((b) => ({ number: BigInt(b.number), hash: b.hash }));
  const shortfalls = r.shortfalls === null ? [] : parseJson(r.shortfalls);
  return {
    id: Number(r.id),
    chainId: r.chain_id,
    watcher: r.watcher as WatcherName,
    forkBlock: BigInt(r.fork_block),
    depth: BigInt(r.depth),
    orphaned,
    beyondMemory: r.beyond_memory,
    detectedAt: new Date(r.detected_at).toISOString(),
    reconciledAt: r.reconciled_at ? new Date(r.reconciled_at).toISOString() : null,
    summary:
      r.reconciled_at === null
        ? null
        : {
            compensations: r.compensations ?? 0,
            compensatedWei: BigInt(r.compensated_wei ?? "0"),
            shortfallWei: BigInt(r.shortfall_wei ?? "0"),
            shortfalls: shortfalls.map((s) => ({
              projectId: s.projectId,
              shortfallWei: BigInt(s.shortfallWei),
            })),
          },
  };
}

/** The watcher's recorded reorganisation that is not reconciled yet, if any. */
export async function openReorg(
  q: Queryable,
  chainId: number,
  watcher: WatcherName,
): Promise<ChainReorg | null> {
  const rows = await q.query<ReorgRow>(
    `SELECT ${REORG_COLUMNS} FROM chain_reorgs WHERE chain_id = $1 AND watcher = $2 AND reconciled_at IS NULL`,
    [chainId, watcher],
  );
  return rows[0] ? toChainReorg(rows[0]) : null;
}

/**
 * Records a reorganisation `findReorg` saw and logs it at error level. Returns the open one
 * instead when the watcher already has one, and null when another instance reconciled this one
 * meanwhile (its orphaned blocks are no longer remembered).
 */
export async function recordReorg(
  db: Db,
  chainId: number,
  watcher: WatcherName,
  reorg: Reorg,
  log: WatcherLog = silentLog,
): Promise<ChainReorg | null> {
  assert.ok(reorg.orphaned.length > 0 && reorg.depth > 0n, "a reorganisation orphans at least one block");
  const recorded = await db.transaction(async (tx) => {
    await lockWatcher(tx, chainId, watcher);
    const open = await openReorg(tx, chainId, watcher);
    if (open) return { reorg: open, created: false };
    const still = await tx.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM chain_applied_blocks a
       JOIN unnest($3::text[], $4::text[]) AS x(n, h) ON a.block_number = x.n::bigint AND a.block_hash = x.h
       WHERE a.chain_id = $1 AND a.watcher = $2`,
      [chainId, watcher, ...orphanedArrays(reorg.orphaned)],
    );
    if (still[0]!.n === 0) return null;
    const orphanedJson = reorg.orphaned.map((b) => ({
      number: b.number.toString(),
      hash: b.hash.toLowerCase(),
    }));
    const rows = await tx.query<ReorgRow>(
      `INSERT INTO chain_reorgs (chain_id, watcher, fork_block, depth, orphaned, beyond_memory)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING ${REORG_COLUMNS}`,
      [
        chainId,
        watcher,
        reorg.forkBlock.toString(),
        reorg.depth.toString(),
        JSON.stringify(orphanedJson),
        reorg.beyondMemory,
      ],
    );
    return { reorg: toChainReorg(rows[0]!), created: true };
  });
  if (recorded?.created) {
    const r = recorded.reorg;
    log.error(
      {
        chainId,
        watcher,
        reorgId: r.id,
        forkBlock: r.forkBlock.toString(),
        depth: r.depth.toString(),
        orphanedBlocks: r.orphaned.length,
        beyondMemory: r.beyondMemory,
      },
      r.beyondMemory
        ? "reorganisation deeper than the confirmation depth reaches below the remembered blocks: effects older than them are not checked"
        : "reorganisation deeper than the confirmation depth: effects from the replaced blocks are being compensated",
    );
  }
  return recorded?.reorg ?? null;
}

function orphanedArrays(blocks: AppliedBlock[]): [string[], string[]] {
  return [blocks.map((b) => b.number.toString()), blocks.map((b) => b.hash.toLowerCase())];
}

/**
 * Closes a reorganisation once every effect from its orphaned blocks was compensated: stores the
 * summary, forgets the orphaned blocks and moves the watcher's cursor back to the fork block (the
 * one place a cursor moves backwards), all in one transaction. False when already reconciled.
 */
export async function markReconciled(
  db: Db,
  reorg: ChainReorg,
  summary: ReorgSummary,
  log: WatcherLog = silentLog,
): Promise<boolean> {
  const { chainId, watcher } = reorg;
  const shortfallWei = summary.shortfalls.reduce((sum, s) => sum + s.shortfallWei, 0n);
  const done = await db.transaction(async (tx) => {
    await lockWatcher(tx, chainId, watcher);
    const updated = await tx.query(
      `UPDATE chain_reorgs SET reconciled_at = now(), compensations = $2, compensated_wei = $3,
         shortfall_wei = $4, shortfalls = $5::jsonb
       WHERE id = $1 AND reconciled_at IS NULL RETURNING id`,
      [
        reorg.id,
        summary.compensations,
        summary.compensatedWei.toString(),
        shortfallWei.toString(),
        JSON.stringify(
          summary.shortfalls.map((s) => ({
            projectId: s.projectId,
            shortfallWei: s.shortfallWei.toString(),
          })),
        ),
      ],
    );
    if (updated.length === 0) return false;
    await tx.query(
      `DELETE FROM chain_applied_blocks a USING unnest($3::text[], $4::text[]) AS x(n, h)
       WHERE a.chain_id = $1 AND a.watcher = $2 AND a.block_number = x.n::bigint AND a.block_hash = x.h`,
      [chainId, watcher, ...orphanedArrays(reorg.orphaned)],
    );
    // Moving the cursor back is part of reconciling: in the same transaction as the forgetting.
    await rewindCursor(tx, chainId, watcher, reorg.forkBlock);
    return true;
  });
  if (!done) return false;
  const fields = {
    chainId,
    watcher,
    reorgId: reorg.id,
    forkBlock: reorg.forkBlock.toString(),
    depth: reorg.depth.toString(),
    compensations: summary.compensations,
    compensatedWei: summary.compensatedWei.toString(),
    shortfallWei: shortfallWei.toString(),
  };
  if (shortfallWei > 0n)
    log.error(
      {
        ...fields,
        shortfalls: summary.shortfalls.map((s) => ({ ...s, shortfallWei: s.shortfallWei.toString() })),
      },
      "reorganisation reconciled with a shortfall: tanks had already spent credits the chain no longer has",
    );
  else log.warn(fields, "reorganisation reconciled");
  return true;
}

// ---------------------------------------------------------------------------------------------
// Reporting

export interface ReorgFilter {
  chainId?: number;
  watcher?: WatcherName;
  unreconciledOnly?: boolean;
  /** Only those detected at or after this time (ms since the epoch). */
  sinceMs?: number;
  /** At most 500; 50 by default. */
  limit?: number;
}

/** Recorded reorganisations, newest first. */
export async function listReorgs(q: Queryable, filter: ReorgFilter = {}): Promise<ChainReorg[]> {
  const limit = Math.min(Math.max(filter.limit ?? 50, 1), 500);
  const rows = await q.query<ReorgRow>(
    `SELECT ${REORG_COLUMNS} FROM chain_reorgs r
     WHERE ($1::int IS NULL OR r.chain_id = $1) AND ($2::text IS NULL OR r.watcher = $2)
       AND (NOT $3::boolean OR r.reconciled_at IS NULL)
       AND ($4::timestamptz IS NULL OR r.detected_at >= $4::timestamptz)
     ORDER BY r.detected_at DESC, r.id DESC LIMIT $5`,
    [
      filter.chainId ?? null,
      filter.watcher ?? null,
      filter.unreconciledOnly ?? false,
      filter.sinceMs === undefined ? null : new Date(filter.sinceMs).toISOString(),
      limit,
    ],
  );
  return rows.map(toChainReorg);
}

export interface ReorgTotals {
  detected: number;
  unreconciled: number;
  /** Sum of the debts left by reconciled reorganisations. */
  shortfallWei: bigint;
  lastDetectedAt: string | null;
}

/** Totals over every reorganisation recorded for a chain, for the parity report. */
export async function reorgTotals(q: Queryable, chainId: number): Promise<ReorgTotals> {
  const rows = await q.query<{
    detected: number;
    unreconciled: number;
    shortfall: string;
    last: Date | null;
  }>(
    `SELECT count(*)::int AS detected, count(*) FILTER (WHERE reconciled_at IS NULL)::int AS unreconciled,
       COALESCE(sum(shortfall_wei), 0)::text AS shortfall, max(detected_at) AS last
     FROM chain_reorgs WHERE chain_id = $1`,
    [chainId],
  );
  const r = rows[0]!;
  return {
    detected: r.detected,
    unreconciled: r.unreconciled,
    shortfallWei: BigInt(r.shortfall),
    lastDetectedAt: r.last ? new Date(r.last).toISOString() : null,
  };
}

/**
 * Pure: readiness from the chain's reorganisations. Degraded while one is unreconciled, and for
 * `windowSec` after one was detected, so that an operator sees it (it means the confirmation depth
 * was not enough); the detail names the fork, the depth and any shortfall.
 */
export function reorgHealth(input: { unreconciled: ChainReorg[]; recent: ChainReorg[]; windowSec: number }): {
  status: "ok" | "degraded";
  detail: string;
} {
  const { unreconciled, recent, windowSec } = input;
  const window = windowSec % 3600 === 0 ? `${windowSec / 3600} h` : `${windowSec} s`;
  const parts: string[] = [];
  for (const r of unreconciled)
    parts.push(`${r.watcher}: reorganisation at block ${r.forkBlock} (depth ${r.depth}) not reconciled yet`);
  const reconciled = recent.filter((r) => r.reconciledAt !== null);
  if (reconciled.length > 0) {
    const latest = reconciled[0]!;
    const shortfall = reconciled.reduce((sum, r) => sum + (r.summary?.shortfallWei ?? 0n), 0n);
    parts.push(
      `${reconciled.length} reorganisation${reconciled.length === 1 ? "" : "s"} deeper than the confirmation depth in the last ${window} (latest: ${latest.watcher}, block ${latest.forkBlock}, depth ${latest.depth})` +
        (shortfall > 0n ? `; ${shortfall} wei could not be taken back from tanks that had spent it` : ""),
    );
  }
  if (parts.length === 0)
    return {
      status: "ok",
      detail: `no reorganisation deeper than the confirmation depth in the last ${window}`,
    };
  return { status: "degraded", detail: parts.join("; ") };
}

/** A readiness probe for one chain's reorganisations (both watchers). */
export function reorgProbe(
  db: Queryable,
  chainId: number,
  options: { windowSec?: number; now?: () => number } = {},
): ReadinessProbe {
  const windowSec = options.windowSec ?? 86_400;
  const now = options.now ?? Date.now;
  return {
    name: `chain:${chainId}:reorgs`,
    async check() {
      try {
        const unreconciled = await listReorgs(db, { chainId, unreconciledOnly: true });
        const recent = await listReorgs(db, { chainId, sinceMs: now() - windowSec * 1000 });
        return reorgHealth({ unreconciled, recent, windowSec });
      } catch (err) {
        return {
          status: "degraded",
          detail: `reorganisations unknown: ${(err as Error).message.split("\n")[0]}`,
        };
      }
    },
  };
}
