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
 */
import type { Address } from "viem";
import { advanceCursor, readCursor } from "../chains/cursors.ts";
import { silentLog, type WatcherLog } from "../chains/poll-loop.ts";
import { type ChainClient, confirmedHead } from "../chains/rpc.ts";
import { earliestPendingSec, nextBlockRange } from "../chains/start-block.ts";
import type { Db } from "../db/db.ts";
import { release } from "../ledger/ledger.ts";
import { type ChainOperation, scanPaidOperations } from "./scan.ts";
import { type Recorded, recordOperation } from "./store.ts";

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
}

export interface SettlementTickReport {
  confirmedHead: bigint | null;
  /** The last block read so far (this tick or an earlier one), null before the first. */
  processedThrough: bigint | null;
  settled: number;
  released: number;
  /** Operations recorded this tick that no tank (fully) paid for. */
  unattributed: number;
}

export interface SettlementWatcher {
  readonly name: typeof SETTLEMENT_WATCHER;
  readonly chainId: number;
  /** One pass: reads the confirmed blocks after the cursor, settles, releases, moves the cursor. */
  tick(): Promise<SettlementTickReport>;
  // The steps of a tick, for tests that stop between them.
  nextRange(confirmedHead: bigint): Promise<{ fromBlock: bigint; toBlock: bigint } | null>;
  scan(fromBlock: bigint, toBlock: bigint): Promise<ChainOperation[]>;
  apply(ops: ChainOperation[]): Promise<Recorded[]>;
  commit(range: { toBlock: bigint }): Promise<void>;
  releaseExpired(): Promise<number>;
}

export function settlementWatcher(options: SettlementWatcherOptions): SettlementWatcher {
  const { db, client, chainId } = options;
  const paymaster = options.paymaster.toLowerCase();
  const log = options.log ?? silentLog;
  const maxBlockRange = options.maxBlockRange ?? 1_000n;
  const maxRangesPerTick = options.maxRangesPerTick ?? 20;
  const marginSec = options.releaseMarginSec ?? 60;
  const context = { chainId, watcher: SETTLEMENT_WATCHER };

  const watcher: SettlementWatcher = {
    name: SETTLEMENT_WATCHER,
    chainId,

    nextRange: (head) =>
      nextBlockRange({
        db,
        client,
        chainId,
        watcher: SETTLEMENT_WATCHER,
        head,
        maxBlocks: maxBlockRange,
        startBlock: options.startBlock,
        since: () => earliestPendingSec(db, chainId),
      }),

    scan: (fromBlock, toBlock) => scanPaidOperations(options, fromBlock, toBlock),

    async apply(ops) {
      const recorded: Recorded[] = [];
      for (const op of ops) {
        const r = await recordOperation(db, chainId, paymaster, op);
        recorded.push(r);
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
          log.warn({ ...context, txHash: op.txHash, authId: op.authId }, "operation charged after its release");
        }
      }
      return recorded;
    },

    commit: (range) => advanceCursor(db, chainId, SETTLEMENT_WATCHER, range.toBlock + 1n),

    releaseExpired: () => releaseExpired(options, marginSec, log),

    async tick() {
      const head = confirmedHead(await client.getBlockNumber(), options.confirmations);
      let settled = 0;
      let unattributed = 0;
      for (let i = 0; head !== null && i < maxRangesPerTick; i++) {
        const range = await watcher.nextRange(head);
        if (!range) break;
        const recorded = await watcher.apply(await watcher.scan(range.fromBlock, range.toBlock));
        for (const r of recorded) {
          if (r.billing?.kind === "charged") settled++;
          if (r.billing !== null && r.unbilledWei > 0n) unattributed++;
        }
        await watcher.commit(range);
      }
      const released = await watcher.releaseExpired();
      if (settled > 0 || released > 0) log.info({ ...context, settled, released }, "gas tanks settled");
      const cursor = await readCursor(db, chainId, SETTLEMENT_WATCHER);
      const processedThrough = cursor !== null && cursor > 0n ? cursor - 1n : null;
      return { confirmedHead: head, processedThrough, settled, released, unattributed };
    },
  };
  return watcher;
}

/**
 * Releases reservations that can no longer be used. The EntryPoint refuses an operation in a
 * block whose timestamp is past validUntil, and block timestamps only grow; so once a block the
 * watcher has already read is later than validUntil (plus a margin), any operation using that
 * authorization would have been in the blocks read. Chain time decides, not this machine's clock.
 */
async function releaseExpired(
  options: SettlementWatcherOptions,
  marginSec: number,
  log: WatcherLog,
): Promise<number> {
  const { db, client, chainId } = options;
  const cursor = await readCursor(db, chainId, SETTLEMENT_WATCHER);
  if (cursor === null || cursor === 0n) return 0;
  const oldest = await db.query<{ valid_until: string | null }>(
    "SELECT min(valid_until)::text AS valid_until FROM sponsorships WHERE chain_id = $1 AND status = 'pending'",
    [chainId],
  );
  if (oldest[0]?.valid_until == null) return 0;
  const readThrough = await client.getBlock({ blockNumber: cursor - 1n });
  const cutoffSec = readThrough.timestamp - BigInt(marginSec);
  if (BigInt(oldest[0].valid_until) >= cutoffSec) return 0;
  const rows = await db.query<{ auth_id: string }>(
    `SELECT auth_id FROM sponsorships WHERE chain_id = $1 AND status = 'pending' AND valid_until < $2
     ORDER BY valid_until LIMIT 500`,
    [chainId, cutoffSec.toString()],
  );
  let released = 0;
  for (const { auth_id } of rows) if (await release(db, auth_id)) released++;
  if (released > 0)
    log.debug({ chainId, released, cutoffSec: Number(cutoffSec) }, "unused reservations released");
  return released;
}
