/**
 * Runs the chain watchers of every chain with a live EntryPoint (one whose paymaster is
 * configured): one settlement watcher per live (EntryPoint, paymaster) pair (gas tank charges
 * from that EntryPoint's logs, each under its own name and cursor, chains/cursors.ts) and one
 * deposit watcher per chain (gas tank credits from transfers). server.ts starts them after the
 * HTTP server listens and stops them on shutdown; the HTTP app itself never starts them, so tests
 * drive `tick()` by hand.
 *
 * All their effects are applied at most once and their cursors only move forward, so two
 * instances watching the same chain would waste RPC calls but never count anything twice. To keep
 * the RPC traffic flat as instances are added, one instance leads each chain and runs its
 * watchers (leadership.ts: a PostgreSQL advisory lock; on PGlite the one process always leads);
 * the others stand by and take over within WATCHER_LEADER_RETRY_MS when the leader is gone.
 * Readiness probes and metrics run on every instance: they read the shared cursors.
 */
import type { Address } from "viem";
import { type ChainConfig, type Config, type EntryPointVersion, liveEntryPoints } from "../config.ts";
import type { Db } from "../db/db.ts";
import { type DepositWatcher, depositWatcher } from "../funding/deposit-watcher.ts";
import { readDepositCoverage } from "../health/deposit-coverage.ts";
import { paymasterIdentityProbe } from "../health/paymaster-identity.ts";
import { paymasterStakeProbe } from "../health/paymaster-stake.ts";
import type { ReadinessProbe } from "../health/readiness.ts";
import type { ChainMetrics, Metrics } from "../metrics/metrics.ts";
import { paidTotals } from "../settlement/store.ts";
import { type SettlementWatcher, settlementWatcher } from "../settlement/watcher.ts";
import { reorgProbe } from "./applied-blocks.ts";
import {
  readCursor,
  type SettlementWatcherName,
  settlementWatcherName,
  type WatcherName,
} from "./cursors.ts";
import { advisoryLockLeadership, type Leadership, soleLeadership, watcherLockKey } from "./leadership.ts";
import { type LoopState, type PollLoop, pollLoop, silentLog, type WatcherLog } from "./poll-loop.ts";
import { type ChainClient, confirmedHead, createChainClient, type RpcErrorSink } from "./rpc.ts";

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
  /** Whether this instance runs the chain's loops; they run only while it leads. */
  leadership: Leadership;
}

export interface ChainWatchers {
  chains: ChainWatcherSet[];
  /** RPC reachability and watcher lag, one probe each, for /health/ready. */
  probes: ReadinessProbe[];
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
}

export type WatcherConfig = Pick<Config, "chains"> &
  Partial<Pick<Config, "databaseUrl" | "watcherLeaderRetryMs" | "depositWarnPercent">>;

export interface ChainWatcherOptions {
  metrics?: Metrics;
  /** The address this instance signs with: readiness checks each paymaster's signer() against it. */
  signer?: Address;
  /** How often readiness reads each paymaster's stake (default PAYMASTER_STAKE_REFRESH_MS); tests use 0. */
  stakeRefreshMs?: number;
}

export function createChainWatchers(
  config: WatcherConfig,
  db: Db,
  options: ChainWatcherOptions = {},
): ChainWatchers {
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
    const set = watchChain(chain, db, forward, leadershipFor(config, db, chain.chainId), options.metrics);
    chains.push(set);
    probes.push(
      ...chainProbes(set, db, {
        metrics: options.metrics,
        warnPercent: config.depositWarnPercent ?? 100,
        signer: options.signer,
        stakeRefreshMs: options.stakeRefreshMs,
      }),
    );
  }
  const loopsOf = (set: ChainWatcherSet) => [...set.settlements.map((s) => s.loop), set.loops.deposits];
  return {
    chains,
    probes,
    start(logger) {
      if (logger) log = logger;
      for (const set of chains) {
        const { chainId } = set.chain;
        options.metrics?.watcherLeader(chainId, false);
        set.leadership.start(async (leading) => {
          options.metrics?.watcherLeader(chainId, leading);
          if (leading) for (const loop of loopsOf(set)) loop.start();
          else await Promise.all(loopsOf(set).map((loop) => loop.stop()));
        }, forward);
      }
    },
    async stop() {
      await Promise.all(chains.map((set) => set.leadership.stop()));
      await Promise.all(chains.flatMap(loopsOf).map((loop) => loop.stop()));
    },
  };
}

/**
 * PostgreSQL: an advisory lock per chain, keyed by the schema the tables are in. PGlite, or a
 * PostgreSQL store whose URL is not known here (a test's own wiring): the one leader.
 */
function leadershipFor(config: WatcherConfig, db: Db, chainId: number): Leadership {
  if (db.kind !== "postgres" || !config.databaseUrl) return soleLeadership();
  return advisoryLockLeadership({
    url: config.databaseUrl,
    key: async () => {
      const rows = await db.query<{ schema: string }>("SELECT current_schema() AS schema");
      return watcherLockKey(rows[0]!.schema, chainId);
    },
    retryMs: config.watcherLeaderRetryMs ?? 3000,
    context: { chainId },
  });
}

/** Counts a chain's failed RPC calls in `metrics`, when there are metrics. */
export function rpcErrorsOf(
  chainId: number,
  metrics: Pick<ChainMetrics, "rpcError"> | undefined,
): RpcErrorSink | undefined {
  return metrics && ((method, kind) => metrics.rpcError(chainId, method, kind));
}

function watchChain(
  chain: ChainConfig,
  db: Db,
  log: WatcherLog,
  leadership: Leadership,
  metrics: ChainMetrics | undefined,
): ChainWatcherSet {
  const client = createChainClient(chain.rpcUrl, { onError: rpcErrorsOf(chain.chainId, metrics) });
  const common = {
    db,
    client,
    chainId: chain.chainId,
    confirmations: chain.confirmations,
    startBlock: chain.startBlock,
    log,
    metrics,
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
    leadership,
  };
}

function chainProbes(
  set: ChainWatcherSet,
  db: Db,
  options: {
    metrics: Metrics | undefined;
    warnPercent: number;
    signer: Address | undefined;
    stakeRefreshMs: number | undefined;
  },
): ReadinessProbe[] {
  const { chainId, confirmations } = set.chain;
  const { metrics } = options;
  // A short timeout and no retries: readiness must answer quickly when the RPC is away.
  const client = createChainClient(set.chain.rpcUrl, {
    timeoutMs: 2_000,
    retryCount: 0,
    onError: rpcErrorsOf(chainId, metrics),
  });
  const head = latestBlockMemo(client);
  // Degraded, not down: authorize needs the database, not the RPC (a chain whose fees go stale
  // refuses its own authorizations, and says so in chain:<id>:fees).
  const rpcProbe: ReadinessProbe = {
    name: `chain:${chainId}`,
    async check() {
      const latest = await head();
      return latest === null
        ? { status: "degraded", detail: "RPC unreachable" }
        : { status: "ok", detail: `latest block ${latest}` };
    },
  };
  const lagProbe = (watcher: WatcherName, loop: PollLoop, note: () => string | null): ReadinessProbe => ({
    name: `chain:${chainId}:${watcher}`,
    async check() {
      const latest = await head();
      const cursor = await readCursor(db, chainId, watcher).catch(() => null);
      const safe = latest === null ? null : confirmedHead(latest, confirmations);
      metrics?.watcherLag(chainId, watcher, lagBlocks(safe, cursor));
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
    ...set.settlements.map((s) => unattributedProbe(db, chainId, s, metrics)),
    reorgProbe(db, chainId),
    depositProbe(db, client, set.chain, options),
    ...set.settlements.map((pair) =>
      paymasterStakeProbe({
        chainId,
        pair,
        client,
        minimums: {
          minStakeWei: set.chain.paymasterMinStakeWei,
          minUnstakeDelaySec: set.chain.paymasterMinUnstakeDelaySec,
        },
        metrics,
        refreshMs: options.stakeRefreshMs,
      }),
    ),
    ...(options.signer
      ? set.settlements.map((pair) =>
          paymasterIdentityProbe({ chainId, pair, client, signer: options.signer! }),
        )
      : []),
  ];
}

/** The paymasters' EntryPoint deposits against what the tanks promise (health/deposit-coverage.ts). */
function depositProbe(
  db: Db,
  client: ChainClient,
  chain: ChainConfig,
  options: { metrics: Metrics | undefined; warnPercent: number },
): ReadinessProbe {
  const { metrics, warnPercent } = options;
  const { chainId } = chain;
  return {
    name: `chain:${chainId}:paymaster-deposit`,
    async check() {
      const coverage = await readDepositCoverage(db, client, chain, warnPercent).catch(() => null);
      if (coverage === null) {
        metrics?.depositCoverage(chainId, "unknown");
        return { status: "degraded", detail: "could not read the gas tanks and open reservations" };
      }
      for (const p of coverage.paymasters) metrics?.paymasterDeposit(chainId, p.version, p.depositWei);
      metrics?.gasTanks(chainId, coverage.tanksWei);
      metrics?.openReservations(chainId, coverage.reservedWei);
      metrics?.depositCoverage(chainId, coverage.state);
      if (coverage.state === "ok") return { status: "ok", detail: coverage.detail };
      return { status: "degraded", detail: coverage.detail, critical: coverage.state === "short" };
    },
  };
}

/** Spend of one paymaster that no tank was charged for; v0.7's probe keeps its name. */
function unattributedProbe(
  db: Db,
  chainId: number,
  pair: SettlementPair,
  metrics: Metrics | undefined,
): ReadinessProbe {
  const paymaster = pair.paymaster.toLowerCase();
  const suffix = pair.version === "0.7" ? "" : `:${pair.version}`;
  return {
    name: `chain:${chainId}:unattributed${suffix}`,
    async check() {
      const totals = await paidTotals(db, chainId, paymaster, null).catch(() => null);
      if (totals === null) return { status: "degraded", detail: "could not read chain_operations" };
      metrics?.unattributedSpend(chainId, pair.version, totals.unattributedWei);
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
  const lag = lagBlocks(safe, cursor);
  const parts = [
    lag === null ? "lag unknown" : `${lag} block${lag === 1n ? "" : "s"} behind the confirmed head`,
  ];
  if (loop.lastError) parts.push(`last tick failed: ${loop.lastError}`);
  if (note) parts.push(note);
  const degraded = lag === null || lag > MAX_LAG_BLOCKS || loop.lastError !== null || note !== null;
  return { status: degraded ? "degraded" : "ok", detail: parts.join("; ") };
}

/** Pure: blocks from a watcher's cursor (the next block it reads) to the confirmed head; null when either is unknown. */
export function lagBlocks(safe: bigint | null, cursor: bigint | null): bigint | null {
  if (safe === null || cursor === null) return null;
  const lag = safe - (cursor - 1n);
  return lag > 0n ? lag : 0n;
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
