/**
 * Settles the gas tanks from what the chain actually charged our paymaster.
 *
 * Each tick reads the confirmed blocks after its cursor (scan.ts), records every operation the
 * EntryPoint charged to our paymaster and charges its authorization's tank its `actualGasCost`
 * (store.ts), moves the cursor, then releases reservations that can no longer be used.
 *
 * Every paid operation ends in exactly one of two places: charged to a tank, or recorded as
 * unattributed spend, which is logged at error level here and reported by readiness and the
 * chain parity report.
 *
 * Crashes: the cursor moves only after its range was recorded, and recording is idempotent, so
 * a restart re-reads the unfinished range and changes nothing already done.
 *
 * Reorganisations deeper than the confirmation depth (chains/applied-blocks.ts has the contract):
 * every recorded operation's block, and the last block of every range, are remembered in the
 * transaction that applied them. Each tick first compares them with the chain; when blocks were
 * replaced, the operations recorded from them are compensated (`reversal` entries give their
 * charges back, and their authorizations count as released), the cursor moves back to the fork,
 * and the replacing blocks are read again: an operation that landed again is charged again, late.
 * Reservations are not released while a reorganisation is being reconciled.
 */
import type { Address } from "viem";
import {
  type AppliedBlock,
  applyEffects,
  type ChainReorg,
  findReorg,
  markReconciled,
  openReorg,
  recordReorg,
  reorgEpoch,
  StaleRangeError,
} from "../chains/applied-blocks.ts";
import { advanceCursor, readCursor, type SettlementWatcherName } from "../chains/cursors.ts";
import { silentLog, type WatcherLog } from "../chains/poll-loop.ts";
import { type ChainClient, confirmedHead } from "../chains/rpc.ts";
import { earliestPendingSec, nextBlockRange } from "../chains/start-block.ts";
import { hex } from "../db/bytes.ts";
import type { Db } from "../db/db.ts";
import { release } from "../ledger/ledger.ts";
import type { ChainMetrics } from "../metrics/metrics.ts";
import { type ChainOperation, scanPaidOperations } from "./scan.ts";
import { orphanedTotals, orphanOperations, type Recorded, recordOperation } from "./store.ts";

/** The name (and cursor) of the settlement watcher of EntryPoint v0.7, the default. */
export const SETTLEMENT_WATCHER = "settlement";

export interface SettlementWatcherOptions {
  db: Db;
  client: ChainClient;
  chainId: number;
  entryPoint: Address;
  paymaster: Address;
  confirmations: number;
  /** First block to read when there is no cursor yet; absent = found from the oldest pending authorization. */
  startBlock?: bigint | null;
  /** Blocks per eth_getLogs call; public RPCs commonly refuse more than a few thousand. */
  maxBlockRange?: bigint;
  /** Bounds the work of one tick; a watcher far behind catches up over several ticks. */
  maxRangesPerTick?: number;
  /** Extra chain time after validUntil before an unused reservation is released. */
  releaseMarginSec?: number;
  log?: WatcherLog;
  /** Where newly recorded operations and reconciled reorganisations are counted. */
  metrics?: Pick<ChainMetrics, "operationSettled" | "reorgReconciled">;
  /**
   * The watcher's name: its cursor, remembered blocks and reorganisations are kept under it, so
   * each (EntryPoint, paymaster) pair of a chain needs its own (chains/cursors.ts). Default
   * SETTLEMENT_WATCHER, EntryPoint v0.7's.
   */
  name?: SettlementWatcherName;
  /**
   * Which expired reservations this watcher releases. A watcher's cursor says when an
   * authorization of its own paymaster can no longer be used, nothing about another paymaster's
   * (their operations are in another EntryPoint's logs, read by another watcher). `{ allBut }`,
   * the default with no one excluded: every reservation on the chain except those of the listed
   * paymasters; a chain's first watcher runs so, which also releases reservations no live
   * paymaster will ever use (v1 rows, a retired deployment's). `"own"`: only `paymaster`'s.
   */
  releases?: "own" | { allBut: Address[] };
  /**
   * Operations of a range recorded at once, each in its transaction (default
   * APPLY_CONCURRENCY). One after another, a chain settled about 120 operations a second on the
   * 2-core bench machine: each is a chain of round trips, mostly waiting.
   */
  applyConcurrency?: number;
}

/**
 * Operations recorded at once. Each takes its own sponsorship's row first and its project's row
 * with its first write, so operations of one project still go one at a time from there (their
 * reads and their round trips before it overlap), and operations of different projects do not
 * wait for each other. A deadlock PostgreSQL detects fails the range, which is read again; what
 * committed is then found recorded.
 */
export const APPLY_CONCURRENCY = 4;

export interface SettlementTickReport {
  confirmedHead: bigint | null;
  /** The last block read so far (this tick or an earlier one), null before the first. */
  processedThrough: bigint | null;
  settled: number;
  released: number;
  /** Operations recorded this tick that no tank (fully) paid for. */
  unattributed: number;
  /** A reorganisation reconciled this tick, if any: how many operations were compensated. */
  reorg: { forkBlock: bigint; depth: bigint; compensated: number; compensatedWei: bigint } | null;
}

/** A scanned range: the operations, the blocks to remember with them, and the epoch it was read in. */
export interface ScannedRange {
  fromBlock: bigint;
  toBlock: bigint;
  ops: ChainOperation[];
  /** The last block of the range, remembered with the cursor. */
  last: AppliedBlock;
  epoch: bigint;
}

export interface SettlementWatcher {
  readonly name: SettlementWatcherName;
  readonly chainId: number;
  /** One pass: reads the confirmed blocks after the cursor, settles, releases, moves the cursor. */
  tick(): Promise<SettlementTickReport>;
  // The steps of a tick, for tests that stop between them.
  nextRange(confirmedHead: bigint): Promise<{ fromBlock: bigint; toBlock: bigint } | null>;
  scan(fromBlock: bigint, toBlock: bigint): Promise<ScannedRange>;
  apply(range: ScannedRange): Promise<Recorded[]>;
  commit(range: ScannedRange): Promise<void>;
  releaseExpired(): Promise<number>;
  /** Finds (or resumes) a reorganisation and reconciles it; null when there is none. */
  reconcileReorg(latestBlock: bigint): Promise<SettlementTickReport["reorg"]>;
}

export function settlementWatcher(options: SettlementWatcherOptions): SettlementWatcher {
  const { db, client, chainId } = options;
  const paymaster = options.paymaster.toLowerCase();
  const log = options.log ?? silentLog;
  const maxBlockRange = options.maxBlockRange ?? 1_000n;
  const maxRangesPerTick = options.maxRangesPerTick ?? 20;
  const marginSec = options.releaseMarginSec ?? 60;
  const name = options.name ?? SETTLEMENT_WATCHER;
  const context = { chainId, watcher: name };

  const watcher: SettlementWatcher = {
    name,
    chainId,

    nextRange: (head) =>
      nextBlockRange({
        db,
        client,
        chainId,
        watcher: name,
        head,
        maxBlocks: maxBlockRange,
        startBlock: options.startBlock,
        since: () => earliestPendingSec(db, chainId),
      }),

    async scan(fromBlock, toBlock) {
      // Taken first: a reorganisation recorded after this makes the range stale.
      const epoch = await reorgEpoch(db, chainId, name);
      const ops = await scanPaidOperations(options, fromBlock, toBlock);
      const last = await consistentView(client, toBlock, ops);
      return { fromBlock, toBlock, ops, last, epoch };
    },

    async apply(range) {
      // Each operation's transaction remembers its block; the remembered blocks past the window
      // are pruned once, when the range's cursor moves (commit), not by every operation.
      const scope = { chainId, watcher: name, epoch: range.epoch, prune: false } as const;
      // Each operation is reported as soon as it is recorded: should a later one fail, the range
      // is read again and what committed is found recorded, never counted or logged again.
      const report = (r: Recorded) => {
        const op = r.op;
        // Counted once, when first recorded: a range read again records nothing new.
        if (r.billing !== null)
          options.metrics?.operationSettled(
            chainId,
            op.success ? "success" : "reverted",
            op.actualGasCostWei,
          );
        if (r.billing !== null && r.unbilledWei > 0n) {
          log.error(
            {
              ...context,
              txHash: op.txHash,
              userOpHash: op.userOpHash,
              authId: op.authId,
              unbilledWei: r.unbilledWei.toString(),
              reason: r.reason,
            },
            "unattributed spend: the paymaster paid for an operation no gas tank was charged for",
          );
        } else if (r.billing?.kind === "charged" && r.billing.late) {
          log.warn(
            { ...context, txHash: op.txHash, authId: op.authId },
            "operation charged after its release",
          );
        }
        return r;
      };
      return inOrder(range.ops, options.applyConcurrency ?? APPLY_CONCURRENCY, async (op) =>
        report(
          await applyEffects(db, scope, [{ number: op.blockNumber, hash: op.blockHash }], (tx) =>
            recordOperation(tx, chainId, paymaster, op),
          ),
        ),
      );
    },

    commit: (range) =>
      applyEffects(db, { chainId, watcher: name, epoch: range.epoch }, [range.last], (tx) =>
        advanceCursor(tx, chainId, name, range.toBlock + 1n),
      ),

    async releaseExpired() {
      if (await openReorg(db, chainId, name)) return 0;
      return releaseExpired({ ...options, name }, marginSec, log);
    },

    async reconcileReorg(latestBlock) {
      const reorg = (await openReorg(db, chainId, name)) ?? (await detect(latestBlock));
      if (!reorg) return null;
      const hashes = reorg.orphaned.map((b) => b.hash);
      await orphanOperations(db, chainId, hashes);
      const totals = await orphanedTotals(db, chainId, hashes);
      await markReconciled(db, reorg, { ...totals, shortfalls: [] }, log);
      options.metrics?.reorgReconciled(chainId, name, reorg.depth, totals.compensations);
      log.error(
        { ...context, forkBlock: reorg.forkBlock.toString(), compensated: totals.compensations },
        "settlements from replaced blocks compensated; the replacing blocks are read again",
      );
      return {
        forkBlock: reorg.forkBlock,
        depth: reorg.depth,
        compensated: totals.compensations,
        compensatedWei: totals.compensatedWei,
      };
    },

    async tick() {
      const latest = await client.getBlockNumber();
      // A reorganisation is settled before anything new is read: the cursor may move back.
      const reorg = await watcher.reconcileReorg(latest);
      const head = confirmedHead(latest, options.confirmations);
      let settled = 0;
      let unattributed = 0;
      for (let i = 0; head !== null && i < maxRangesPerTick; i++) {
        const range = await watcher.nextRange(head);
        if (!range) break;
        const scanned = await watcher.scan(range.fromBlock, range.toBlock);
        const recorded = await watcher.apply(scanned);
        for (const r of recorded) {
          if (r.billing?.kind === "charged") settled++;
          if (r.billing !== null && r.unbilledWei > 0n) unattributed++;
        }
        await watcher.commit(scanned);
      }
      const released = await watcher.releaseExpired();
      if (settled > 0 || released > 0) log.info({ ...context, settled, released }, "gas tanks settled");
      const cursor = await readCursor(db, chainId, name);
      const processedThrough = cursor !== null && cursor > 0n ? cursor - 1n : null;
      return { confirmedHead: head, processedThrough, settled, released, unattributed, reorg };
    },
  };

  async function detect(latestBlock: bigint): Promise<ChainReorg | null> {
    const found = await findReorg(db, client, chainId, name, { latestBlock });
    return found ? recordReorg(db, chainId, name, found, log) : null;
  }
  return watcher;
}

/** The reservations a watcher releases, as a predicate on `sponsorships` whose parameter is $2. */
function releaseScope(
  releases: NonNullable<SettlementWatcherOptions["releases"]>,
  paymaster: Address,
): { predicate: string; param: string | string[] } {
  if (releases === "own") return { predicate: "paymaster = $2", param: paymaster.toLowerCase() };
  return {
    predicate: "(paymaster IS NULL OR NOT (paymaster = ANY($2::text[])))",
    param: releases.allBut.map((a) => a.toLowerCase()),
  };
}

/**
 * The hashes remembered for a range must come from one view of the chain (applied-blocks.ts,
 * point 4): the logs give each operation's block hash; the range's last header is read after
 * them, then every operation's block header is read again and must match its logs. A mismatch
 * means the chain changed during the read, and the range is refused (read again next tick).
 */
async function consistentView(
  client: ChainClient,
  toBlock: bigint,
  ops: ChainOperation[],
): Promise<AppliedBlock> {
  const last = await client.getBlock({ blockNumber: toBlock });
  const byNumber = new Map(ops.map((op) => [op.blockNumber, op.blockHash.toLowerCase()]));
  for (const [number, hash] of byNumber) {
    const header = number === toBlock ? last : await client.getBlock({ blockNumber: number });
    if (header.hash?.toLowerCase() !== hash) {
      throw new StaleRangeError(`block ${number} changed while its logs were read`);
    }
  }
  return { number: toBlock, hash: last.hash! };
}

/**
 * Releases reservations that can no longer be used. The EntryPoint refuses an operation in a
 * block whose timestamp is past validUntil, and block timestamps only grow; so once a block the
 * watcher has already read is later than validUntil (plus a margin), any operation using that
 * authorization would have been in the blocks read. Chain time decides, not this machine's clock.
 */
async function releaseExpired(
  options: SettlementWatcherOptions & { name: SettlementWatcherName },
  marginSec: number,
  log: WatcherLog,
): Promise<number> {
  const { db, client, chainId } = options;
  const cursor = await readCursor(db, chainId, options.name);
  if (cursor === null || cursor === 0n) return 0;
  const scope = releaseScope(options.releases ?? { allBut: [] }, options.paymaster);
  // Pending reservations are found through sponsorship_status_index (migration 021).
  const oldest = await db.query<{ valid_until: string | null }>(
    `SELECT min(valid_until)::text AS valid_until FROM sponsorship_status_index
     WHERE chain_id = $1 AND status = 'pending' AND ${scope.predicate}`,
    [chainId, scope.param],
  );
  if (oldest[0]?.valid_until == null) return 0;
  const readThrough = await client.getBlock({ blockNumber: cursor - 1n });
  const cutoffSec = readThrough.timestamp - BigInt(marginSec);
  if (BigInt(oldest[0].valid_until) >= cutoffSec) return 0;
  const rows = await db.query<{ auth_id: string }>(
    `SELECT ${hex("s.auth_id")} AS auth_id FROM (
       SELECT sponsorship_id, valid_until FROM sponsorship_status_index
       WHERE chain_id = $1 AND status = 'pending' AND ${scope.predicate} AND valid_until < $3
       ORDER BY valid_until LIMIT 500) x
     JOIN sponsorships s ON s.id = x.sponsorship_id
     ORDER BY x.valid_until`,
    [chainId, scope.param, cutoffSec.toString()],
  );
  let released = 0;
  for (const { auth_id } of rows) if (await release(db, auth_id)) released++;
  if (released > 0)
    log.debug({ chainId, released, cutoffSec: Number(cutoffSec) }, "unused reservations released");
  return released;
}

/**
 * `run` over `items`, at most `limit` at once, the results in the items' order. After a failure
 * nothing more starts; the runs under way are waited for, then the first failure is thrown.
 */
async function inOrder<I, O>(items: I[], limit: number, run: (item: I) => Promise<O>): Promise<O[]> {
  const results = new Array<O>(items.length);
  let next = 0;
  let failure: { err: unknown } | null = null;
  const lane = async () => {
    while (failure === null && next < items.length) {
      const i = next++;
      try {
        results[i] = await run(items[i]!);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failure !== null) throw (failure as { err: unknown }).err;
  return results;
}
