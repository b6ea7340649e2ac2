/**
 * Settles the gas tank from what the chain actually charged.
 *
 * The watcher reads two logs, both emitted in the transaction that ran the operation:
 * - `Sponsored(authId, userOpHash, sender, actualGasCost)` from our paymaster's postOp names the
 *   authorization. Its cost is not the charge: the EntryPoint adds postOp's own gas and the
 *   penalty on unused gas after postOp returns.
 * - `UserOperationEvent(userOpHash, sender, paymaster, nonce, success, actualGasCost,
 *   actualGasUsed)` from the EntryPoint is the charge, taken from the paymaster's deposit.
 * They are joined on (transaction, userOpHash). When postOp itself reverted the EntryPoint
 * emits no Sponsored (it does not call postOp again), so the authorization id is read from the
 * handleOps calldata instead, where the operation is found by its sender and nonce.
 *
 * Reorgs: the watcher only reads blocks at least `confirmations` below the head, so a reorg
 * shallower than `confirmations` blocks never reaches it. A deeper one is not rolled back:
 * settlements and releases already applied from the replaced blocks stay as they were.
 *
 * Crashes: the cursor moves only after its range was applied, and settle/release apply at most
 * once, so a restart re-reads the unfinished range and changes nothing that was already done.
 */

import { type Address, decodeFunctionData, getAbiItem, type Hex, isAddressEqual, size, slice } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import type { Db } from "../db/db.ts";
import { release, type Settlement, settle } from "../ledger/ledger.ts";
import { sponsorPaymasterAbi } from "../paymaster/abi.ts";
import { PAYMASTER_DATA_OFFSET } from "../sponsor/paymaster-data.ts";
import { advanceCursor, readCursor } from "./cursors.ts";
import { silentLog, type WatcherLog } from "./poll-loop.ts";
import { type ChainClient, confirmedHead } from "./rpc.ts";
import { earliestPendingSec, nextBlockRange } from "./start-block.ts";

export const SETTLEMENT_WATCHER = "settlement";

const userOperationEvent = getAbiItem({ abi: entryPoint07Abi, name: "UserOperationEvent" });
const sponsoredEvent = getAbiItem({ abi: sponsorPaymasterAbi, name: "Sponsored" });

/** paymasterAndData: address and two gas limits, then maxGasCost (16), validUntil (6), validAfter (6), authId (32), signature (65). */
const AUTH_ID_OFFSET = PAYMASTER_DATA_OFFSET + 16 + 6 + 6;
const PAYMASTER_AND_DATA_SIZE = AUTH_ID_OFFSET + 32 + 65;

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

/** One sponsored operation as the chain recorded it. */
export interface OnChainOp {
  txHash: Hex;
  blockNumber: bigint;
  userOpHash: Hex;
  sender: Address;
  nonce: bigint;
  success: boolean;
  actualGasCostWei: bigint;
  actualGasUsed: bigint;
}

export interface ScannedRange {
  fromBlock: bigint;
  toBlock: bigint;
  settlements: Settlement[];
  /** Operations paid by our paymaster whose authorization could not be identified. */
  unidentified: OnChainOp[];
}

export interface SettlementTickReport {
  confirmedHead: bigint | null;
  /** The last block read so far (this tick or an earlier one), null before the first. */
  processedThrough: bigint | null;
  settled: number;
  released: number;
}

export interface SettlementWatcher {
  readonly name: typeof SETTLEMENT_WATCHER;
  readonly chainId: number;
  /** One pass: reads the confirmed blocks after the cursor, settles, releases, moves the cursor. */
  tick(): Promise<SettlementTickReport>;
  // The steps of a tick, for tests that stop between them.
  nextRange(confirmedHead: bigint): Promise<{ fromBlock: bigint; toBlock: bigint } | null>;
  scan(fromBlock: bigint, toBlock: bigint): Promise<ScannedRange>;
  apply(settlements: Settlement[]): Promise<number>;
  commit(range: { toBlock: bigint }): Promise<void>;
  releaseExpired(): Promise<number>;
}

export function settlementWatcher(options: SettlementWatcherOptions): SettlementWatcher {
  const { db, client, chainId } = options;
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

    scan: (fromBlock, toBlock) => scanRange(options, fromBlock, toBlock),

    async apply(settlements) {
      let applied = 0;
      for (const s of settlements) {
        if (await settle(db, s)) applied++;
        else await explainNotApplied(db, log, s);
      }
      return applied;
    },

    commit: (range) => advanceCursor(db, chainId, SETTLEMENT_WATCHER, range.toBlock + 1n),

    releaseExpired: () => releaseExpired(options, marginSec, log),

    async tick() {
      const head = confirmedHead(await client.getBlockNumber(), options.confirmations);
      let settled = 0;
      for (let i = 0; head !== null && i < maxRangesPerTick; i++) {
        const range = await watcher.nextRange(head);
        if (!range) break;
        const scanned = await watcher.scan(range.fromBlock, range.toBlock);
        for (const op of scanned.unidentified) {
          log.error(
            { ...context, txHash: op.txHash, userOpHash: op.userOpHash },
            "sponsored operation without an identifiable authorization",
          );
        }
        settled += await watcher.apply(scanned.settlements);
        await watcher.commit(scanned);
      }
      const released = await watcher.releaseExpired();
      if (settled > 0 || released > 0) log.info({ ...context, settled, released }, "gas tanks settled");
      const cursor = await readCursor(db, chainId, SETTLEMENT_WATCHER);
      const processedThrough = cursor !== null && cursor > 0n ? cursor - 1n : null;
      return { confirmedHead: head, processedThrough, settled, released };
    },
  };
  return watcher;
}

/** Reads both logs over one block range and turns each operation into a settlement. */
async function scanRange(
  options: SettlementWatcherOptions,
  fromBlock: bigint,
  toBlock: bigint,
): Promise<ScannedRange> {
  const { client, entryPoint, paymaster } = options;
  const [opLogs, sponsoredLogs] = await Promise.all([
    client.getLogs({
      address: entryPoint,
      event: userOperationEvent,
      args: { paymaster },
      fromBlock,
      toBlock,
      strict: true,
    }),
    client.getLogs({ address: paymaster, event: sponsoredEvent, fromBlock, toBlock, strict: true }),
  ]);
  const ops: OnChainOp[] = opLogs.map((l) => ({
    txHash: l.transactionHash,
    blockNumber: l.blockNumber,
    userOpHash: l.args.userOpHash,
    sender: l.args.sender,
    nonce: l.args.nonce,
    success: l.args.success,
    actualGasCostWei: l.args.actualGasCost,
    actualGasUsed: l.args.actualGasUsed,
  }));
  const authIds = new Map(
    sponsoredLogs.map((l) => [opKey(l.transactionHash, l.args.userOpHash), l.args.authId]),
  );
  const settlements: Settlement[] = [];
  const unidentified: OnChainOp[] = [];
  for (const op of ops) {
    const authId = authIds.get(opKey(op.txHash, op.userOpHash)) ?? (await authIdFromCalldata(options, op));
    if (authId) settlements.push(toSettlement(op, authId));
    else unidentified.push(op);
  }
  return { fromBlock, toBlock, settlements, unidentified };
}

function opKey(txHash: Hex, userOpHash: Hex): string {
  return `${txHash.toLowerCase()}:${userOpHash.toLowerCase()}`;
}

export function toSettlement(op: OnChainOp, authId: Hex): Settlement {
  return {
    authId: authId.toLowerCase(),
    outcome: op.success ? "success" : "reverted",
    actualGasUsed: op.actualGasUsed,
    actualGasCostWei: op.actualGasCostWei,
    txHash: op.txHash.toLowerCase(),
    userOpHash: op.userOpHash.toLowerCase(),
  };
}

/**
 * The authorization id of an operation whose postOp reverted (so no Sponsored log): found in the
 * handleOps calldata by the operation's sender and nonce, which identify it uniquely. Only a
 * direct handleOps call to the EntryPoint can be read this way; a bundler contract in between
 * would need call traces, and such an operation is reported as unidentified.
 */
async function authIdFromCalldata(options: SettlementWatcherOptions, op: OnChainOp): Promise<Hex | null> {
  const tx = await options.client.getTransaction({ hash: op.txHash });
  if (!tx.to || !isAddressEqual(tx.to, options.entryPoint)) return null;
  let call: ReturnType<typeof decodeFunctionData<typeof entryPoint07Abi>>;
  try {
    call = decodeFunctionData({ abi: entryPoint07Abi, data: tx.input });
  } catch {
    return null;
  }
  if (call.functionName !== "handleOps") return null;
  const packed = call.args[0].find((u) => isAddressEqual(u.sender, op.sender) && u.nonce === op.nonce);
  if (!packed || size(packed.paymasterAndData) !== PAYMASTER_AND_DATA_SIZE) return null;
  if (!isAddressEqual(slice(packed.paymasterAndData, 0, 20), options.paymaster)) return null;
  return slice(packed.paymasterAndData, AUTH_ID_OFFSET, AUTH_ID_OFFSET + 32);
}

/** Why settle() did nothing: normal after a restart, worth a loud log in the other cases. */
async function explainNotApplied(db: Db, log: WatcherLog, s: Settlement): Promise<void> {
  const rows = await db.query<{ status: string }>("SELECT status FROM sponsorships WHERE auth_id = $1", [
    s.authId,
  ]);
  const status = rows[0]?.status;
  if (status === "success" || status === "reverted") return;
  if (status === "expired") {
    log.error(
      { authId: s.authId, txHash: s.txHash },
      "operation found on chain after its reservation was released",
    );
  } else {
    log.warn(
      { authId: s.authId, txHash: s.txHash, status: status ?? "unknown" },
      "on-chain operation not settled",
    );
  }
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
