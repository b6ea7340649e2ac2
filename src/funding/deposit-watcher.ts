/**
 * Credits native-token transfers to funding addresses, at the chain's confirmation depth.
 *
 * Every confirmed block after the cursor is read with `debug_traceBlockByNumber` and the
 * `callTracer`, which shows value moved by contracts (internal transfers, SELFDESTRUCT payouts)
 * as well as by the transaction itself, and which marks reverted frames. An RPC without that
 * method gets a fallback: the block's transactions whose own value went to a funding address and
 * whose receipt succeeded. Transfers made by contracts are then missed, and readiness says so.
 *
 * Each transfer is credited under the reference `<chainId>:<txHash>:<frame path>` (see
 * transfers.ts), and the ledger applies a reference at most once. The cursor moves only after a
 * range has been credited; a restart in between reads the range again and credits nothing twice.
 * Like the settlement watcher it never reads above `confirmations` below the head: reorgs
 * shallower than that are harmless, deeper ones are not undone.
 */

import { BaseError, type Hex, MethodNotFoundRpcError, MethodNotSupportedRpcError, toHex } from "viem";
import { advanceCursor, readCursor } from "../chains/cursors.ts";
import { silentLog, type WatcherLog } from "../chains/poll-loop.ts";
import { type ChainClient, confirmedHead } from "../chains/rpc.ts";
import { earliestFundingSec, nextBlockRange } from "../chains/start-block.ts";
import type { Db } from "../db/db.ts";
import { creditDeposit } from "../ledger/ledger.ts";
import { depositReference } from "./store.ts";
import { type CallFrame, topLevelTransfer, type ValueTransfer, valueTransfers } from "./transfers.ts";

export const DEPOSIT_WATCHER = "deposits";

/** How transfers are found: not decided until the first block is read. */
export type TracingMode = "unknown" | "callTracer" | "top-level";

export interface DepositWatcherOptions {
  db: Db;
  client: ChainClient;
  chainId: number;
  confirmations: number;
  /** First block to read when there is no cursor yet; absent = found from the funding accounts' age. */
  startBlock?: bigint | null;
  /** Bounds the blocks read in one tick (each costs a block and a trace request). */
  maxBlocksPerTick?: number;
  /** Blocks fetched at the same time. */
  concurrency?: number;
  /** "off" skips call tracing and only reads the transactions' own value. */
  tracing?: "auto" | "off";
  log?: WatcherLog;
}

export interface Deposit {
  projectId: string;
  /** The funding address, lower-case. */
  address: string;
  txHash: Hex;
  position: string;
  amountWei: bigint;
  blockNumber: bigint;
  reference: string;
}

export interface DepositScan {
  fromBlock: bigint;
  toBlock: bigint;
  deposits: Deposit[];
}

export interface DepositTickReport {
  confirmedHead: bigint | null;
  processedThrough: bigint | null;
  credited: number;
}

export interface DepositWatcher {
  readonly name: typeof DEPOSIT_WATCHER;
  readonly chainId: number;
  tick(): Promise<DepositTickReport>;
  tracing(): TracingMode;
  // The steps of a tick, for tests that stop between them (a crash after crediting).
  nextRange(confirmedHead: bigint): Promise<{ fromBlock: bigint; toBlock: bigint } | null>;
  scan(fromBlock: bigint, toBlock: bigint): Promise<DepositScan>;
  apply(deposits: Deposit[]): Promise<number>;
  commit(range: { toBlock: bigint }): Promise<void>;
}

export function depositWatcher(options: DepositWatcherOptions): DepositWatcher {
  const { db, client, chainId } = options;
  const log = options.log ?? silentLog;
  const maxBlocks = BigInt(options.maxBlocksPerTick ?? 100);
  const reader = blockReader(options, log);

  const watcher: DepositWatcher = {
    name: DEPOSIT_WATCHER,
    chainId,
    tracing: () => reader.mode(),

    nextRange: (head) =>
      nextBlockRange({
        db,
        client,
        chainId,
        watcher: DEPOSIT_WATCHER,
        head,
        maxBlocks,
        startBlock: options.startBlock,
        since: () => earliestFundingSec(db, chainId),
      }),

    async scan(fromBlock, toBlock) {
      const accounts = await fundingAddresses(db, chainId);
      if (accounts.size === 0) return { fromBlock, toBlock, deposits: [] };
      const concurrency = options.concurrency ?? 4;
      const found = await reader.transfers(fromBlock, toBlock, concurrency, (to) => accounts.has(to));
      return { fromBlock, toBlock, deposits: found.map((f) => toDeposit(chainId, accounts, f)) };
    },

    apply: (deposits) => creditDeposits(db, log, chainId, deposits),

    commit: (range) => advanceCursor(db, chainId, DEPOSIT_WATCHER, range.toBlock + 1n),

    async tick() {
      const head = confirmedHead(await client.getBlockNumber(), options.confirmations);
      let credited = 0;
      const range = head === null ? null : await watcher.nextRange(head);
      if (range) {
        const scanned = await watcher.scan(range.fromBlock, range.toBlock);
        credited = await watcher.apply(scanned.deposits);
        await watcher.commit(scanned);
      }
      const cursor = await readCursor(db, chainId, DEPOSIT_WATCHER);
      return {
        confirmedHead: head,
        processedThrough: cursor !== null && cursor > 0n ? cursor - 1n : null,
        credited,
      };
    },
  };
  return watcher;
}

function toDeposit(chainId: number, accounts: Map<string, string>, found: LocatedTransfer): Deposit {
  const { blockNumber, txHash, transfer } = found;
  return {
    projectId: accounts.get(transfer.to)!,
    address: transfer.to,
    txHash,
    position: transfer.position,
    amountWei: transfer.valueWei,
    blockNumber,
    reference: depositReference(chainId, txHash, transfer.position),
  };
}

/** Credits each deposit whose reference is new; returns how many were. */
async function creditDeposits(
  db: Db,
  log: WatcherLog,
  chainId: number,
  deposits: Deposit[],
): Promise<number> {
  let credited = 0;
  for (const d of deposits) {
    const { projectId, reference, amountWei } = d;
    if (!(await creditDeposit(db, { projectId, reference, amountWei }))) continue;
    credited++;
    log.info({ chainId, projectId, reference, amountWei: amountWei.toString() }, "deposit credited");
  }
  return credited;
}

/** Funding address (lower-case) → project, for one chain. */
async function fundingAddresses(db: Db, chainId: number): Promise<Map<string, string>> {
  const rows = await db.query<{ project_id: string; address: string }>(
    "SELECT project_id, address FROM funding_accounts WHERE chain_id = $1",
    [chainId],
  );
  return new Map(rows.map((r) => [r.address.toLowerCase(), r.project_id]));
}

interface LocatedTransfer {
  blockNumber: bigint;
  txHash: Hex;
  transfer: ValueTransfer;
}

type RawRequest = (args: { method: string; params: unknown[] }) => Promise<unknown>;

/** Reads the value transfers of a block range, by trace when the RPC can, else top-level only. */
function blockReader(options: DepositWatcherOptions, log: WatcherLog) {
  const { client } = options;
  let mode: TracingMode = options.tracing === "off" ? "top-level" : "unknown";

  async function readBlock(blockNumber: bigint, wanted: (to: string) => boolean): Promise<LocatedTransfer[]> {
    const block = await client.getBlock({ blockNumber, includeTransactions: true });
    const traces = mode === "top-level" ? null : await traceBlock(client, blockNumber);
    if (traces === "unsupported") {
      if (mode !== "top-level")
        log.warn(
          { chainId: options.chainId },
          "the RPC has no call tracing: only direct transfers to funding addresses are credited",
        );
      mode = "top-level";
    } else if (traces) {
      if (mode === "unknown") mode = "callTracer";
      if (traces.length !== block.transactions.length)
        throw new Error(
          `block ${blockNumber}: ${traces.length} traces for ${block.transactions.length} transactions`,
        );
      return traces.flatMap((t, i) => {
        // A node that could not trace one transaction must not make its deposits vanish.
        if (!t.result) throw new Error(`block ${blockNumber}: transaction ${i} has no trace`);
        const txHash = t.txHash ?? block.transactions[i]!.hash;
        return valueTransfers(t.result)
          .filter((transfer) => wanted(transfer.to))
          .map((transfer) => ({ blockNumber, txHash, transfer }));
      });
    }
    const found: LocatedTransfer[] = [];
    for (const tx of block.transactions) {
      const transfer = topLevelTransfer(tx);
      if (!transfer || !wanted(transfer.to)) continue;
      // Without a trace, the receipt is the only sign that a transfer was not undone.
      const receipt = await client.getTransactionReceipt({ hash: tx.hash });
      if (receipt.status === "success") found.push({ blockNumber, txHash: tx.hash, transfer });
    }
    return found;
  }

  return {
    mode: () => mode,
    /** Transfers to `wanted` recipients that took effect in blocks [from, to], in block order. */
    async transfers(
      fromBlock: bigint,
      toBlock: bigint,
      concurrency: number,
      wanted: (to: string) => boolean,
    ): Promise<LocatedTransfer[]> {
      const all: LocatedTransfer[] = [];
      for (let start = fromBlock; start <= toBlock; start += BigInt(concurrency)) {
        const batch: Promise<LocatedTransfer[]>[] = [];
        for (let n = start; n <= toBlock && n < start + BigInt(concurrency); n++)
          batch.push(readBlock(n, wanted));
        for (const found of await Promise.all(batch)) all.push(...found);
      }
      return all;
    },
  };
}

interface BlockTrace {
  txHash?: Hex;
  result?: CallFrame;
}

/** One call trace per transaction of the block, or "unsupported" when the RPC has no such method. */
async function traceBlock(client: ChainClient, blockNumber: bigint): Promise<BlockTrace[] | "unsupported"> {
  try {
    const request = client.request as unknown as RawRequest;
    const traces = await request({
      method: "debug_traceBlockByNumber",
      params: [toHex(blockNumber), { tracer: "callTracer" }],
    });
    if (!Array.isArray(traces)) throw new Error("debug_traceBlockByNumber returned no list");
    return traces;
  } catch (err) {
    if (isUnsupportedMethod(err)) return "unsupported";
    throw err;
  }
}

function isUnsupportedMethod(err: unknown): boolean {
  if (err instanceof BaseError) {
    const match = err.walk(
      (e) => e instanceof MethodNotFoundRpcError || e instanceof MethodNotSupportedRpcError,
    );
    if (match) return true;
  }
  const message = (err as Error)?.message ?? "";
  return /method .*(not found|not supported|not available|does not exist)|unsupported method|not whitelisted/i.test(
    message,
  );
}
