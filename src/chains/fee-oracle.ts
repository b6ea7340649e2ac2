/**
 * What each chain charges for gas now: the latest block's base fee and the node's suggested
 * priority fee, read in the background about once per block and kept in memory, so that
 * authorize prices an operation with a synchronous lookup and never waits on the RPC.
 *
 * A reading is "fresh" while it is younger than the chain's FEE_MAX_AGE_MS. A failed refresh
 * keeps the last reading, which stays usable until it is too old; past that the chain is
 * "stale" and authorize refuses it (503) rather than guess a price. Age is measured from when
 * this process received the answer, not from the block's timestamp: a chain that mines only on
 * demand (anvil) or has idle stretches still has a current base fee.
 *
 * Two implementations: chainFeeOracle (JSON-RPC, what the server runs) and fixedFeeOracle
 * (constant fees, for tests of the HTTP app that have no chain).
 */
import { type ChainConfig, type Config, liveEntryPoints } from "../config.ts";
import type { ReadinessProbe } from "../health/readiness.ts";
import type { ChainMetrics } from "../metrics/metrics.ts";
import { pollLoop, redactUrls, silentLog, type WatcherLog } from "./poll-loop.ts";
import { type ChainClient, createChainClient } from "./rpc.ts";

/** A chain's gas prices, in wei per gas. */
export interface FeeLevels {
  baseFeePerGasWei: bigint;
  priorityFeePerGasWei: bigint;
}

export interface ObservedFees extends FeeLevels {
  /** The block whose base fee this is. */
  blockNumber: bigint;
  /** When this process received the answer (the service clock, ms since the epoch). */
  observedAtMs: number;
}

export type StaleReason =
  /** No refresh has succeeded yet (the oracle just started, or the RPC has been away since). */
  | "never_read"
  /** The last successful reading is older than the chain's FEE_MAX_AGE_MS. */
  | "too_old"
  /** The oracle does not watch this chain (unknown, inactive, or no live EntryPoint: no paymaster). */
  | "not_watched";

export type FeeReading =
  | { kind: "fresh"; fees: ObservedFees }
  /** ageMs: how old the last reading is; null when there is none. */
  | { kind: "stale"; reason: StaleReason; ageMs: number | null };

export interface FeeOracle {
  /** The cached reading of a chain; synchronous, for the authorize hot path. */
  current(chainId: number): FeeReading;
  /** Starts the background refresh of every watched chain; the logger reports failures. */
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
  /** Refreshes every watched chain now and resolves when done; never throws (warm-up, tests). */
  refresh(): Promise<void>;
  /** One readiness probe per watched chain: degraded (never down) while its fees are stale. */
  probes: ReadinessProbe[];
}

/** Pure: a cached reading judged against the clock and the chain's bound. */
export function judgeReading(latest: ObservedFees | null, nowMs: number, maxAgeMs: number): FeeReading {
  if (latest === null) return { kind: "stale", reason: "never_read", ageMs: null };
  // A clock stepped backwards makes a reading look younger than zero; it is simply new.
  const ageMs = Math.max(0, nowMs - latest.observedAtMs);
  return ageMs > maxAgeMs ? { kind: "stale", reason: "too_old", ageMs } : { kind: "fresh", fees: latest };
}

/** Pure: seconds since a chain's last successful reading, Infinity when there is none (for the metric). */
export function readingAgeSec(reading: FeeReading, nowMs: number): number {
  if (reading.kind === "fresh") return Math.max(0, nowMs - reading.fees.observedAtMs) / 1000;
  return reading.ageMs === null ? Number.POSITIVE_INFINITY : reading.ageMs / 1000;
}

/** Pure: the readiness of a chain's fees, from its reading and the last refresh's failure. */
export function feeHealth(input: {
  reading: FeeReading;
  maxAgeMs: number;
  lastError: string | null;
  failures: number;
}): { status: "ok" | "degraded"; detail: string } {
  const { reading, maxAgeMs, lastError, failures } = input;
  const parts: string[] = [];
  if (reading.kind === "fresh") {
    const f = reading.fees;
    parts.push(
      `base fee ${f.baseFeePerGasWei} wei, priority fee ${f.priorityFeePerGasWei} wei at block ${f.blockNumber}`,
    );
  } else if (reading.reason === "too_old") {
    parts.push(`fees are ${reading.ageMs} ms old (limit ${maxAgeMs} ms): authorize refuses this chain`);
  } else {
    parts.push("fees not read yet: authorize refuses this chain");
  }
  if (lastError !== null) {
    parts.push(`${failures} refresh${failures === 1 ? "" : "es"} failed in a row, last: ${lastError}`);
  }
  return { status: reading.kind === "fresh" ? "ok" : "degraded", detail: parts.join("; ") };
}

interface ChainFees {
  chain: ChainConfig;
  client: ChainClient;
  latest: ObservedFees | null;
  /** The refresh under way, shared by the loop and refresh() so they never read twice at once. */
  inFlight: Promise<void> | null;
  failures: number;
  lastError: string | null;
}

export interface ChainFeeOracleOptions {
  /** The service clock; tests may move it to age a reading without waiting. */
  now?: () => number;
  /** Per-request timeout of a refresh; a slow node must not hold a refresh for long. */
  rpcTimeoutMs?: number;
  /** Where failed RPC calls are counted. */
  metrics?: Pick<ChainMetrics, "rpcError">;
}

export function chainFeeOracle(
  config: Pick<Config, "chains">,
  options: ChainFeeOracleOptions = {},
): FeeOracle {
  const now = options.now ?? Date.now;
  // Like the watchers, the oracle gets its logger at start; until then, none.
  let log: WatcherLog = silentLog;
  const states = new Map<number, ChainFees>();
  for (const chain of config.chains) {
    // One reading per chain serves every paymaster on it: fees are the chain's, not an EntryPoint's.
    if (!chain.active || liveEntryPoints(chain).length === 0) continue;
    // No viem retries: the loop refreshes again within a second anyway.
    const client = createChainClient(chain.rpcUrl, {
      timeoutMs: options.rpcTimeoutMs ?? 5_000,
      retryCount: 0,
      onError: options.metrics && ((method, kind) => options.metrics?.rpcError(chain.chainId, method, kind)),
    });
    states.set(chain.chainId, { chain, client, latest: null, inFlight: null, failures: 0, lastError: null });
  }

  const refreshChain = (s: ChainFees): Promise<void> => {
    s.inFlight ??= readFees(s, now, log).finally(() => {
      s.inFlight = null;
    });
    return s.inFlight;
  };
  const loops = [...states.values()].map((s) =>
    pollLoop(() => refreshChain(s), {
      name: `fees:${s.chain.chainId}`,
      intervalMs: s.chain.feeRefreshMs,
      // Back off while the RPC is away, but not so far that a recovered RPC waits long.
      maxBackoffMs: Math.max(s.chain.feeRefreshMs, 5_000),
      // Failures are logged by readFees, once per streak; the loop's own log would repeat them.
      log: silentLog,
      now,
    }),
  );

  const current = (chainId: number): FeeReading => {
    const s = states.get(chainId);
    if (!s) return { kind: "stale", reason: "not_watched", ageMs: null };
    return judgeReading(s.latest, now(), s.chain.feeMaxAgeMs);
  };

  return {
    current,
    start(logger) {
      if (logger) log = logger;
      for (const loop of loops) loop.start();
    },
    async stop() {
      await Promise.all(loops.map((loop) => loop.stop()));
    },
    async refresh() {
      await Promise.all([...states.values()].map((s) => refreshChain(s).catch(() => {})));
    },
    probes: [...states.values()].map((s) => ({
      name: `chain:${s.chain.chainId}:fees`,
      async check() {
        const reading = current(s.chain.chainId);
        return feeHealth({
          reading,
          maxAgeMs: s.chain.feeMaxAgeMs,
          lastError: s.lastError,
          failures: s.failures,
        });
      },
    })),
  };
}

/** One refresh of one chain: updates its cached reading, or records the failure and rethrows. */
async function readFees(s: ChainFees, now: () => number, log: WatcherLog): Promise<void> {
  const chainId = s.chain.chainId;
  try {
    const [block, priority] = await Promise.all([
      s.client.getBlock({ blockTag: "latest" }),
      s.client.request({ method: "eth_maxPriorityFeePerGas" }),
    ]);
    if (block.baseFeePerGas === null) throw new Error("the latest block has no base fee (no EIP-1559)");
    s.latest = Object.freeze({
      baseFeePerGasWei: block.baseFeePerGas,
      priorityFeePerGasWei: BigInt(priority),
      blockNumber: block.number,
      observedAtMs: now(),
    });
    if (s.failures > 0) log.info({ chainId, failures: s.failures }, "fee oracle refreshes again");
    s.failures = 0;
    s.lastError = null;
  } catch (err) {
    s.lastError = describeError(err);
    s.failures++;
    if (s.failures === 1) {
      log.warn(
        { chainId, err: s.lastError },
        "fee oracle refresh failed; the last reading serves until it is too old (logged once until it recovers)",
      );
    }
    throw err;
  }
}

/**
 * One line for logs and readiness. viem's errors carry a short message and the cause's details
 * ("fetch failed", an RPC error's text); their full message also names the RPC URL, which may
 * hold an API key, so only these parts are kept and any URL in them is cut out.
 */
function describeError(err: unknown): string {
  const e = err as { shortMessage?: unknown; details?: unknown; message?: unknown };
  const short =
    typeof e.shortMessage === "string" ? e.shortMessage : String(e.message ?? err).split("\n")[0]!;
  const details = typeof e.details === "string" && e.details !== "" ? ` (${e.details.split("\n")[0]})` : "";
  return redactUrls(`${short}${details}`);
}

/** An oracle that answers the same fees for every chain; `set` changes them, null makes every chain stale. */
export interface FixedFeeOracle extends FeeOracle {
  set(fees: FeeLevels | null): void;
}

export function fixedFeeOracle(fees: FeeLevels | null, now: () => number = Date.now): FixedFeeOracle {
  let levels = fees;
  return {
    current() {
      if (levels === null) return { kind: "stale", reason: "never_read", ageMs: null };
      return { kind: "fresh", fees: { ...levels, blockNumber: 0n, observedAtMs: now() } };
    },
    set(next) {
      levels = next;
    },
    start() {},
    async stop() {},
    async refresh() {},
    probes: [],
  };
}
