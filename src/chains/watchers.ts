/**
 * Runs the chain watchers of every chain with a live EntryPoint (one whose paymaster is
 * configured): one settlement watcher per live (EntryPoint, paymaster) pair (gas tank charges
 * from that EntryPoint's logs, each under its own name and cursor, chains/cursors.ts) and one
 * deposit watcher per chain (gas tank credits from transfers). server.ts starts them after the
 * HTTP server listens and stops them on shutdown; the HTTP app itself never starts them, so tests
 * drive `tick()` by hand.
 *
 * Every service instance may run them: all their effects are applied at most once and their
 * cursors only move forward, so two instances watching the same chain waste RPC calls but never
 * count anything twice.
 */
import type { Address } from "viem";
import { type ChainConfig, type Config, type EntryPointVersion, liveEntryPoints } from "../config.ts";
import type { Db } from "../db/db.ts";
import { type DepositWatcher, depositWatcher } from "../funding/deposit-watcher.ts";
import type { ReadinessProbe } from "../health/routes.ts";
import { paidTotals } from "../settlement/store.ts";
import { type SettlementWatcher, settlementWatcher } from "../settlement/watcher.ts";
import { reorgProbe } from "./applied-blocks.ts";
import {
  readCursor,
  type SettlementWatcherName,
  settlementWatcherName,
  type WatcherName,
} from "./cursors.ts";
import { type LoopState, type PollLoop, pollLoop, silentLog, type WatcherLog } from "./poll-loop.ts";
import { type ChainClient, confirmedHead, createChainClient } from "./rpc.ts";

/** A watcher further behind the confirmed head than this is reported as degraded. */
export const MAX_LAG_BLOCKS = 100n;

/** The settlement watcher of one live (EntryPoint, paymaster) pair, and its loop. */
export interface SettlementPair {
  version: EntryPointVersion;
  entryPoint: Address;
  paymaster: Address;
  name: SettlementWatcherName;
  watcher: SettlementWatcher;
  loop: PollLoop;
}

export interface ChainWatcherSet {
  chain: ChainConfig;
  /** One per live EntryPoint, v0.7 first. */
  settlements: SettlementPair[];
  /** The first of `settlements` (v0.7's when it is live), as before there were several. */
  settlement: SettlementWatcher;
  deposits: DepositWatcher;
  /** `settlement` is the first pair's loop, as `settlement` above. */
  loops: { settlement: PollLoop; deposits: PollLoop };
}

export interface ChainWatchers {
  chains: ChainWatcherSet[];
  /** RPC reachability and watcher lag, one probe each, for /health/ready. */
  probes: ReadinessProbe[];
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
}

export function createChainWatchers(config: Pick<Config, "chains">, db: Db): ChainWatchers {
  // Watchers get their logger at start (the app's logger exists only then); until then, none.
  let log: WatcherLog = silentLog;
  const forward: WatcherLog = {
    debug: (o, m) => log.debug(o, m),
    info: (o, m) => log.info(o, m),
    warn: (o, m) => log.warn(o, m),
    error: (o, m) => log.error(o, m),
  };
  const chains: ChainWatcherSet[] = [];
  const probes: ReadinessProbe[] = [];
  for (const chain of config.chains) {
    if (!chain.active || liveEntryPoints(chain).length === 0) continue;
    const set = watchChain(chain, db, forward);
    chains.push(set);
    probes.push(...chainProbes(set, db));
  }
  const loopsOf = (set: ChainWatcherSet) => [...set.settlements.map((s) => s.loop), set.loops.deposits];
  return {
    chains,
    probes,
    start(logger) {
      if (logger) log = logger;
      for (const loop of chains.flatMap(loopsOf)) loop.start();
    },
    async stop() {
      await Promise.all(chains.flatMap(loopsOf).map((loop) => loop.stop()));
    },
  };
}

function watchChain(chain: ChainConfig, db: Db, log: WatcherLog): ChainWatcherSet {
  const client = createChainClient(chain.rpcUrl);
  const common = {
    db,
    client,
    chainId: chain.chainId,
    confirmations: chain.confirmations,
    startBlock: chain.startBlock,
    log,
  };
  const loop = (name: string, tick: () => Promise<unknown>) =>
    pollLoop(tick, { name: `${name}:${chain.chainId}`, intervalMs: chain.pollIntervalMs, log });
  const live = liveEntryPoints(chain);
  const settlements = live.map((pair, i): SettlementPair => {
    const name = settlementWatcherName(pair.version);
    // Each watcher releases its own paymaster's reservations; the first also those of no live
    // paymaster (v1 rows, a retired deployment's), which no other watcher would ever release.
    const others = live.filter((other) => other !== pair).map((other) => other.paymaster);
    const watcher = settlementWatcher({
      ...common,
      entryPoint: pair.entryPoint,
      paymaster: pair.paymaster,
      name,
      releases: i === 0 ? { allBut: others } : "own",
    });
    return { ...pair, name, watcher, loop: loop(name, watcher.tick) };
  });
  const deposits = depositWatcher(common);
  return {
    chain,
    settlements,
    settlement: settlements[0]!.watcher,
    deposits,
    loops: { settlement: settlements[0]!.loop, deposits: loop("deposits", deposits.tick) },
  };
}

function chainProbes(set: ChainWatcherSet, db: Db): ReadinessProbe[] {
  const { chainId, confirmations } = set.chain;
  // A short timeout and no retries: readiness must answer quickly when the RPC is away.
  const head = latestBlockMemo(createChainClient(set.chain.rpcUrl, { timeoutMs: 2_000, retryCount: 0 }));
  const rpcProbe: ReadinessProbe = {
    name: `chain:${chainId}`,
    async check() {
      const latest = await head();
      return latest === null
        ? { status: "down", detail: "RPC unreachable" }
        : { status: "ok", detail: `latest block ${latest}` };
    },
  };
  const lagProbe = (watcher: WatcherName, loop: PollLoop, note: () => string | null): ReadinessProbe => ({
    name: `chain:${chainId}:${watcher}`,
    async check() {
      const latest = await head();
      const cursor = await readCursor(db, chainId, watcher).catch(() => null);
      const safe = latest === null ? null : confirmedHead(latest, confirmations);
      return watcherHealth({ safe, cursor, loop: loop.state(), note: note() });
    },
  });
  const tracingNote = () =>
    set.deposits.tracing() === "top-level"
      ? "no call tracing on this RPC: transfers made by contracts are not credited"
      : null;
  return [
    rpcProbe,
    ...set.settlements.map((s) => lagProbe(s.name, s.loop, () => null)),
    lagProbe("deposits", set.loops.deposits, tracingNote),
    ...set.settlements.map((s) => unattributedProbe(db, chainId, s)),
    reorgProbe(db, chainId),
  ];
}

/** Spend of one paymaster that no tank was charged for; v0.7's probe keeps its name. */
function unattributedProbe(db: Db, chainId: number, pair: SettlementPair): ReadinessProbe {
  const paymaster = pair.paymaster.toLowerCase();
  const suffix = pair.version === "0.7" ? "" : `:${pair.version}`;
  return {
    name: `chain:${chainId}:unattributed${suffix}`,
    async check() {
      const totals = await paidTotals(db, chainId, paymaster, null).catch(() => null);
      if (totals === null) return { status: "degraded", detail: "could not read chain_operations" };
      return totals.unattributedWei === 0n
        ? {
            status: "ok",
            detail: `${totals.operations} paid operation${totals.operations === 1 ? "" : "s"}, all charged to gas tanks`,
          }
        : {
            status: "degraded",
            detail: `unattributed spend: ${totals.unattributedWei} wei over ${totals.unattributedCount} operations paid by the paymaster but not charged to a tank`,
          };
    },
  };
}

/** Pure: a watcher's state for readiness, from its lag and its last tick. */
export function watcherHealth(input: {
  safe: bigint | null;
  cursor: bigint | null;
  loop: LoopState;
  note: string | null;
}): { status: "ok" | "degraded"; detail: string } {
  const { safe, cursor, loop, note } = input;
  const lag = safe === null || cursor === null ? null : safe - (cursor - 1n) > 0n ? safe - (cursor - 1n) : 0n;
  const parts = [
    lag === null ? "lag unknown" : `${lag} block${lag === 1n ? "" : "s"} behind the confirmed head`,
  ];
  if (loop.lastError) parts.push(`last tick failed: ${loop.lastError}`);
  if (note) parts.push(note);
  const degraded = lag === null || lag > MAX_LAG_BLOCKS || loop.lastError !== null || note !== null;
  return { status: degraded ? "degraded" : "ok", detail: parts.join("; ") };
}

/** The latest block number, shared by the probes of one readiness check; null when unreachable. */
function latestBlockMemo(client: ChainClient, ttlMs = 1_000): () => Promise<bigint | null> {
  let cached: { at: number; value: Promise<bigint | null> } | null = null;
  return () => {
    if (cached && Date.now() - cached.at < ttlMs) return cached.value;
    const value = client.getBlockNumber({ cacheTime: 0 }).catch(() => null);
    cached = { at: Date.now(), value };
    return value;
  };
}
