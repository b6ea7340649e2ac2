/**
 * Credits native-token transfers to funding addresses, at the chain's confirmation depth, and
 * takes credits back when a reorganisation deeper than that depth removes their blocks.
 *
 * Every confirmed block after the cursor is read with `debug_traceBlockByNumber` and the
 * `callTracer`, which shows value moved by contracts (internal transfers, SELFDESTRUCT payouts)
 * as well as by the transaction itself, and which marks reverted frames. An RPC without that
 * method gets a fallback: the block's transactions whose own value went to a funding address and
 * whose receipt succeeded. Transfers made by contracts are then missed, and readiness says so.
 *
 * Each credit is recorded with its block (`chain_deposits`, store.ts) in the transaction that
 * credits it, and that block's hash is remembered (chains/applied-blocks.ts, whose contract this
 * watcher follows); the hashes of every block of a range, checked to form one chain, are
 * remembered with the cursor. A transfer's first credit has the reference `<chainId>:<txHash>:<frame path>`
 * (see transfers.ts), and a transfer has at most one live credit, so re-reading a block never
 * credits it twice. The cursor moves only after a range has been credited; a restart in between
 * reads the range again and credits nothing twice.
 *
 * Reorganisations: each tick first compares the remembered blocks with the chain. When blocks were
 * replaced, every credit from them is taken back by a `reversal` entry
 * (`reorg:<credit reference>:<orphaned block hash>`), one transaction each, never below an empty
 * tank: what the tank had already spent is recorded as a shortfall (a debt) with the
 * reorganisation and logged at error level. The cursor then returns to the fork block, so the new
 * blocks are read, and a transfer the new chain includes again is credited again under a new
 * reference (`…:<inclusion>:<block hash>`): net, it is credited once.
 */

import { BaseError, type Hex, MethodNotFoundRpcError, MethodNotSupportedRpcError, toHex } from "viem";
import {
  type AppliedBlock,
  applyEffects,
  assertLinked,
  type BlockHeader,
  type ChainReorg,
  findReorg,
  markReconciled,
  openReorg,
  recordReorg,
  rememberedHash,
  reorgEpoch,
  StaleRangeError,
  type WatcherScope,
} from "../chains/applied-blocks.ts";
import { advanceCursor, readCursor } from "../chains/cursors.ts";
import { silentLog, type WatcherLog } from "../chains/poll-loop.ts";
import { type ChainClient, confirmedHead } from "../chains/rpc.ts";
import { earliestFundingSec, nextBlockRange } from "../chains/start-block.ts";
import type { Db } from "../db/db.ts";
import { creditDeposit, reverseCredit } from "../ledger/ledger.ts";
import type { ChainMetrics } from "../metrics/metrics.ts";
import {
  depositReference,
  type LiveDeposit,
  liveDepositsIn,
  lockLiveDeposit,
  markDepositOrphaned,
  orphanedDepositTotals,
  recordChainDeposit,
} from "./store.ts";
import {
  type CallFrame,
  reversalReference,
  topLevelTransfer,
  type ValueTransfer,
  valueTransfers,
} from "./transfers.ts";

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
  /** How far below its newest remembered block the watcher keeps block hashes (applied-blocks.ts). */
  retainBlocks?: bigint;
  log?: WatcherLog;
  /** Where credits and reconciled reorganisations are counted. */
  metrics?: Pick<ChainMetrics, "depositCredited" | "reorgReconciled">;
}

export interface Deposit {
  projectId: string;
  /** The funding address, lower-case. */
  address: string;
  txHash: Hex;
  position: string;
  amountWei: bigint;
  blockNumber: bigint;
  blockHash: Hex;
  /** The transfer's name, and the reference of its first credit (a later one extends it). */
  reference: string;
}

export interface DepositScan {
  fromBlock: bigint;
  toBlock: bigint;
  deposits: Deposit[];
  /** Every block read, in order, remembered with the cursor (none when no funding address exists). */
  blocks: AppliedBlock[];
  /** The reorganisation epoch when the range was read (applied-blocks.ts). */
  epoch: bigint;
}

/** What reconciling a reorganisation did, in a tick's report. */
export interface DepositReorgReport {
  reorgId: number;
  forkBlock: bigint;
  depth: bigint;
  reversed: number;
  reversedWei: bigint;
  shortfallWei: bigint;
}

export interface DepositTickReport {
  confirmedHead: bigint | null;
  processedThrough: bigint | null;
  credited: number;
  /** The reorganisation reconciled at the start of this tick, if any. */
  reorg: DepositReorgReport | null;
}

export interface DepositWatcher {
  readonly name: typeof DEPOSIT_WATCHER;
  readonly chainId: number;
  tick(): Promise<DepositTickReport>;
  tracing(): TracingMode;
  // The steps of a tick, for tests that stop between them (a crash after crediting).
  nextRange(confirmedHead: bigint): Promise<{ fromBlock: bigint; toBlock: bigint } | null>;
  scan(fromBlock: bigint, toBlock: bigint): Promise<DepositScan>;
  /** Credits deposits read under `epoch` (default: the current one). */
  apply(deposits: Deposit[], epoch?: bigint): Promise<number>;
  commit(scan: Pick<DepositScan, "toBlock" | "blocks" | "epoch">): Promise<void>;
  // The steps of reconciling a reorganisation, for tests that stop between them.
  /** The open reorganisation (recorded earlier, or found on chain now and recorded). */
  detectReorg(latestBlock?: bigint): Promise<ChainReorg | null>;
  /** Live credits from the reorganisation's orphaned blocks. */
  orphanedCredits(reorg: ChainReorg): Promise<LiveDeposit[]>;
  /** Takes the credits back; returns how many were taken back by this call. */
  compensate(reorg: ChainReorg, credits: LiveDeposit[]): Promise<number>;
  /** Stores the summary, forgets the orphaned blocks and moves the cursor back to the fork. */
  finishReorg(reorg: ChainReorg): Promise<DepositReorgReport>;
}

export function depositWatcher(options: DepositWatcherOptions): DepositWatcher {
  const { db, client, chainId } = options;
  const log = options.log ?? silentLog;
  const maxBlocks = BigInt(options.maxBlocksPerTick ?? 100);
  const reader = blockReader(options, log);
  const scope = (epoch: bigint): WatcherScope => ({
    chainId,
    watcher: DEPOSIT_WATCHER,
    epoch,
    retainBlocks: options.retainBlocks,
  });
  const currentEpoch = () => reorgEpoch(db, chainId, DEPOSIT_WATCHER);

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
      // Taken first: whatever is recorded or reconciled after this makes the range stale.
      const epoch = await currentEpoch();
      const accounts = await fundingAddresses(db, chainId);
      if (accounts.size === 0) return { fromBlock, toBlock, deposits: [], blocks: [], epoch };
      const concurrency = options.concurrency ?? 4;
      const read = await reader.transfers(fromBlock, toBlock, concurrency, (to) => accounts.has(to));
      const previous =
        fromBlock > 0n ? await rememberedHash(db, chainId, DEPOSIT_WATCHER, fromBlock - 1n) : null;
      assertLinked(read.headers, previous);
      return {
        fromBlock,
        toBlock,
        deposits: read.transfers.map((f) => toDeposit(chainId, accounts, f)),
        blocks: read.headers.map((h) => ({ number: h.number, hash: h.hash })),
        epoch,
      };
    },

    apply: async (deposits, epoch) =>
      creditDeposits(db, log, scope(epoch ?? (await currentEpoch())), deposits, options.metrics),

    commit: (range) =>
      applyEffects(db, scope(range.epoch), range.blocks, (tx) =>
        advanceCursor(tx, chainId, DEPOSIT_WATCHER, range.toBlock + 1n),
      ),

    ...reconciler(db, client, chainId, log),

    async tick() {
      const latest = await client.getBlockNumber();
      // A reorganisation is settled before anything new is read: the cursor may have to move back.
      const reorg = await watcher.detectReorg(latest);
      let reorgReport: DepositReorgReport | null = null;
      if (reorg) {
        await watcher.compensate(reorg, await watcher.orphanedCredits(reorg));
        reorgReport = await watcher.finishReorg(reorg);
        options.metrics?.reorgReconciled(chainId, DEPOSIT_WATCHER, reorg.depth, reorgReport.reversed);
      }
      const head = confirmedHead(latest, options.confirmations);
      let credited = 0;
      const range = head === null ? null : await watcher.nextRange(head);
      if (range) {
        const scanned = await watcher.scan(range.fromBlock, range.toBlock);
        credited = await watcher.apply(scanned.deposits, scanned.epoch);
        await watcher.commit(scanned);
      }
      const cursor = await readCursor(db, chainId, DEPOSIT_WATCHER);
      return {
        confirmedHead: head,
        processedThrough: cursor !== null && cursor > 0n ? cursor - 1n : null,
        credited,
        reorg: reorgReport,
      };
    },
  };
  return watcher;
}

/** The steps of reconciling a reorganisation (contract point 1 in chains/applied-blocks.ts). */
function reconciler(
  db: Db,
  client: ChainClient,
  chainId: number,
  log: WatcherLog,
): Pick<DepositWatcher, "detectReorg" | "orphanedCredits" | "compensate" | "finishReorg"> {
  return {
    async detectReorg(latestBlock) {
      const open = await openReorg(db, chainId, DEPOSIT_WATCHER);
      if (open) return open;
      const found = await findReorg(db, client, chainId, DEPOSIT_WATCHER, { latestBlock });
      return found ? recordReorg(db, chainId, DEPOSIT_WATCHER, found, log) : null;
    },

    orphanedCredits: (reorg) =>
      liveDepositsIn(
        db,
        chainId,
        reorg.orphaned.map((b) => b.hash),
      ),

    async compensate(reorg, credits) {
      let reversed = 0;
      for (const credit of credits) if (await takeBack(db, log, chainId, reorg, credit)) reversed++;
      return reversed;
    },

    async finishReorg(reorg) {
      const totals = await orphanedDepositTotals(db, reorg.id);
      const summary = {
        compensations: totals.compensations,
        compensatedWei: totals.reversedWei,
        shortfalls: totals.shortfalls,
      };
      await markReconciled(db, reorg, summary, log);
      return {
        reorgId: reorg.id,
        forkBlock: reorg.forkBlock,
        depth: reorg.depth,
        reversed: totals.compensations,
        reversedWei: totals.reversedWei,
        shortfallWei: totals.shortfalls.reduce((sum, s) => sum + s.shortfallWei, 0n),
      };
    },
  };
}

function toDeposit(chainId: number, accounts: Map<string, string>, found: LocatedTransfer): Deposit {
  const { blockNumber, blockHash, txHash, transfer } = found;
  return {
    projectId: accounts.get(transfer.to)!,
    address: transfer.to,
    txHash,
    position: transfer.position,
    amountWei: transfer.valueWei,
    blockNumber,
    blockHash,
    reference: depositReference(chainId, txHash, transfer.position),
  };
}

/**
 * Credits each deposit that has no live credit yet, each in one transaction with its record and
 * its block's hash; returns how many were credited.
 */
async function creditDeposits(
  db: Db,
  log: WatcherLog,
  scope: WatcherScope,
  deposits: Deposit[],
  metrics: DepositWatcherOptions["metrics"],
): Promise<number> {
  const { chainId } = scope;
  let credited = 0;
  for (const d of deposits) {
    const block = { number: d.blockNumber, hash: d.blockHash };
    const outcome = await applyEffects(db, scope, [block], async (tx) => {
      const recorded = await recordChainDeposit(tx, { chainId, ...d });
      if (recorded.kind === "known") return recorded;
      const { projectId, amountWei } = d;
      // False only for a transfer credited before credits were recorded by block: it stays credited.
      const fresh = await creditDeposit(
        db,
        { projectId, chainId, reference: recorded.reference, amountWei },
        tx,
      );
      return { ...recorded, fresh };
    });
    if (outcome.kind === "known") {
      if (outcome.blockHash !== null && outcome.blockHash !== d.blockHash.toLowerCase())
        log.error(
          { chainId, reference: d.reference, creditedFrom: outcome.blockHash, nowIn: d.blockHash },
          "a credited transfer is now in another block, and no reorganisation was noticed: it stays credited once",
        );
      continue;
    }
    if (!outcome.fresh) continue;
    credited++;
    metrics?.depositCredited(chainId, d.amountWei);
    log.info(
      { chainId, projectId: d.projectId, reference: outcome.reference, amountWei: d.amountWei.toString() },
      "deposit credited",
    );
  }
  return credited;
}

/**
 * Takes back one credit from an orphaned block, in one transaction: the reversal entry (capped at
 * what the tank holds), then the record marked orphaned. True when this call did it.
 */
async function takeBack(
  db: Db,
  log: WatcherLog,
  chainId: number,
  reorg: ChainReorg,
  credit: LiveDeposit,
): Promise<boolean> {
  const outcome = await db.transaction(async (tx) => {
    const locked = await lockLiveDeposit(tx, chainId, credit);
    if (!locked) return null;
    const reversal = await reverseCredit(tx, {
      projectId: locked.projectId,
      chainId,
      reference: reversalReference(locked.reference, locked.blockHash),
      amountWei: locked.amountWei,
    });
    await markDepositOrphaned(tx, chainId, locked, reorg.id, reversal.reversedWei);
    return reversal;
  });
  if (!outcome) return false;
  const fields = {
    chainId,
    watcher: DEPOSIT_WATCHER,
    reorgId: reorg.id,
    projectId: credit.projectId,
    reference: credit.reference,
    orphanedBlock: credit.blockHash,
    creditedWei: credit.amountWei.toString(),
    reversedWei: outcome.reversedWei.toString(),
  };
  if (outcome.shortfallWei > 0n)
    log.error(
      { ...fields, shortfallWei: outcome.shortfallWei.toString() },
      "deposit from an orphaned block only partly taken back: the tank had spent it, the rest is a debt",
    );
  else log.warn(fields, "deposit from an orphaned block taken back");
  return true;
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
  blockHash: Hex;
  txHash: Hex;
  transfer: ValueTransfer;
}

interface ReadBlock {
  header: BlockHeader;
  transfers: LocatedTransfer[];
}

type RawRequest = (args: { method: string; params: unknown[] }) => Promise<unknown>;

/** Reads the value transfers of a block range, by trace when the RPC can, else top-level only. */
function blockReader(options: DepositWatcherOptions, log: WatcherLog) {
  const { client } = options;
  let mode: TracingMode = options.tracing === "off" ? "top-level" : "unknown";

  async function readBlock(blockNumber: bigint, wanted: (to: string) => boolean): Promise<ReadBlock> {
    const block = await client.getBlock({ blockNumber, includeTransactions: true });
    if (!block.hash) throw new Error(`block ${blockNumber} has no hash yet`);
    const header = { number: blockNumber, hash: block.hash, parentHash: block.parentHash };
    const at = (txHash: Hex, transfer: ValueTransfer) => ({
      blockNumber,
      blockHash: block.hash!,
      txHash,
      transfer,
    });
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
      const transfers = traces.flatMap((t, i) => {
        // A node that could not trace one transaction must not make its deposits vanish.
        if (!t.result) throw new Error(`block ${blockNumber}: transaction ${i} has no trace`);
        const txHash = block.transactions[i]!.hash;
        // The trace is asked for by number: it must be of the block whose hash is remembered.
        if (t.txHash && t.txHash.toLowerCase() !== txHash.toLowerCase())
          throw new StaleRangeError(`block ${blockNumber} changed between its read and its trace`);
        return valueTransfers(t.result)
          .filter((transfer) => wanted(transfer.to))
          .map((transfer) => at(txHash, transfer));
      });
      return { header, transfers };
    }
    const transfers: LocatedTransfer[] = [];
    for (const tx of block.transactions) {
      const transfer = topLevelTransfer(tx);
      if (!transfer || !wanted(transfer.to)) continue;
      // Without a trace, the receipt is the only sign that a transfer was not undone.
      const receipt = await client.getTransactionReceipt({ hash: tx.hash });
      if (receipt.blockHash.toLowerCase() !== block.hash.toLowerCase())
        throw new StaleRangeError(`block ${blockNumber} changed between its read and a receipt`);
      if (receipt.status === "success") transfers.push(at(tx.hash, transfer));
    }
    return { header, transfers };
  }

  return {
    mode: () => mode,
    /**
     * Transfers to `wanted` recipients that took effect in blocks [from, to], in block order, and
     * the headers of those blocks (to check that they form one chain).
     */
    async transfers(
      fromBlock: bigint,
      toBlock: bigint,
      concurrency: number,
      wanted: (to: string) => boolean,
    ): Promise<{ headers: BlockHeader[]; transfers: LocatedTransfer[] }> {
      const headers: BlockHeader[] = [];
      const transfers: LocatedTransfer[] = [];
      for (let start = fromBlock; start <= toBlock; start += BigInt(concurrency)) {
        const batch: Promise<ReadBlock>[] = [];
        for (let n = start; n <= toBlock && n < start + BigInt(concurrency); n++)
          batch.push(readBlock(n, wanted));
        for (const read of await Promise.all(batch)) {
          headers.push(read.header);
          transfers.push(...read.transfers);
        }
      }
      return { headers, transfers };
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
