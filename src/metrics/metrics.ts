/**
 * The service's Prometheus metrics (prom-client), one registry per wired service so that two
 * instances in one process (tests) count apart; the process metrics (CPU, memory, event loop,
 * GC) are the process's and live in one shared registry, added to every exposition.
 *
 * Amounts of wei exceed 2^53 and Prometheus samples are float64, so amounts are exposed as gauges
 * in ether (10^18 wei of the chain's native token: S on Sonic), converted from the exact decimal
 * string: about 15 significant digits, ample for graphs and alerts. They are never read back:
 * the ledger and the parity reports keep exact wei.
 */
import cluster from "node:cluster";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { formatEther } from "viem";
import { clusterMetricsClient } from "./cluster.ts";

/** The state of a readiness check as a number, for alerting: 0 ok, 1 degraded, 2 down. */
export const CHECK_STATUS_VALUE = { ok: 0, degraded: 1, down: 2 } as const;

/** How the paymasters' deposit compares with what the tanks promise, as a number (see health/deposit-coverage.ts). */
export const COVERAGE_VALUE = { unknown: -1, ok: 0, low: 1, short: 2 } as const;

export interface Metrics {
  readonly contentType: string;
  /** One answered HTTP request: route template (not the raw path), method, status, seconds. */
  httpRequest(route: string, method: string, statusCode: number, seconds: number): void;
  /** The outcome of one authorization request: "ok" or the refusal's stable code. */
  authorizeOutcome(api: "rest" | "rpc", method: string, code: string): void;
  /** How many reservations of one project went to the database in one call (ledger/batcher.ts). */
  reservationBatch(size: number): void;
  /** Blocks between a watcher's cursor and the confirmed head; null when unknown (the series is removed). */
  watcherLag(chainId: number, watcher: string, blocks: bigint | null): void;
  /** Whether this instance runs the chain's watchers (leadership.ts). */
  watcherLeader(chainId: number, leading: boolean): void;
  unattributedSpend(chainId: number, entryPoint: string, wei: bigint): void;
  paymasterDeposit(chainId: number, entryPoint: string, wei: bigint | null): void;
  gasTanks(wei: bigint): void;
  openReservations(chainId: number, wei: bigint): void;
  depositCoverage(chainId: number, state: keyof typeof COVERAGE_VALUE): void;
  readinessCheck(check: string, status: keyof typeof CHECK_STATUS_VALUE): void;
  /** The text exposition: this service's metrics, then the process's. */
  exposition(): Promise<string>;
  /**
   * The same, as prom-client's JSON, for a cluster's primary to add up (metrics/cluster.ts).
   * Counters and histograms are summed over the workers; gauges, which describe the chains and
   * the store every worker sees alike, take the largest (the worst, for readiness and coverage).
   */
  snapshot(): Promise<unknown[]>;
}

/** Wei as float ether for a gauge: exact decimal string first, so the only rounding is float64's. */
export function weiToEther(wei: bigint): number {
  return Number(formatEther(wei));
}

let processRegistry: Registry | null = null;

/** The process's default metrics, collected once per process whatever the number of registries. */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * @param options.clusterWorker this process is a cluster worker: /metrics answers the whole
 *   cluster's metrics, added up by the primary (metrics/cluster.ts). Default: `cluster.isWorker`.
 */
export function createMetrics(options: { version: string; clusterWorker?: boolean }): Metrics {
  const registry = new Registry();
  const registers = [registry];
  new Gauge({
    aggregator: "first",
    name: "gss_build_info",
    help: "The running version (always 1)",
    labelNames: ["version"],
    registers,
  }).set({ version: options.version }, 1);
  const requests = new Counter({
    name: "gss_http_requests_total",
    help: "HTTP requests answered, by route template, method and status code",
    labelNames: ["route", "method", "status_code"],
    registers,
  });
  const duration = new Histogram({
    name: "gss_http_request_duration_seconds",
    help: "Time to answer an HTTP request, by route template and method",
    labelNames: ["route", "method"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const outcomes = new Counter({
    name: "gss_authorize_outcomes_total",
    help: 'Authorization requests by API (rest: POST /sponsor/authorize, rpc: POST /rpc), method and outcome ("ok" or the stable error code)',
    labelNames: ["api", "method", "code"],
    registers,
  });
  const batches = new Histogram({
    name: "gss_reservation_batch_size",
    help: "Reservations of one project sent to the database in one call",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers,
  });
  const lag = new Gauge({
    aggregator: "max",
    name: "gss_watcher_lag_blocks",
    help: "Blocks between a chain watcher's cursor and the chain's confirmed head",
    labelNames: ["chain_id", "watcher"],
    registers,
  });
  const leader = new Gauge({
    aggregator: "max",
    name: "gss_watcher_leader",
    help: "1 when this instance runs the chain's watchers, 0 when another instance does",
    labelNames: ["chain_id"],
    registers,
  });
  const unattributed = new Gauge({
    aggregator: "max",
    name: "gss_unattributed_spend_ether",
    help: "What a paymaster paid on chain that no gas tank was charged for (ether: 1e18 wei of the native token)",
    labelNames: ["chain_id", "entry_point"],
    registers,
  });
  const deposit = new Gauge({
    aggregator: "max",
    name: "gss_paymaster_deposit_ether",
    help: "The paymaster's deposit in its EntryPoint (ether: 1e18 wei of the native token)",
    labelNames: ["chain_id", "entry_point"],
    registers,
  });
  const tanks = new Gauge({
    aggregator: "max",
    name: "gss_gas_tanks_ether",
    help: "The sum of every project's gas tank balance (ether)",
    registers,
  });
  const reservations = new Gauge({
    aggregator: "max",
    name: "gss_open_reservations_ether",
    help: "Reservations of authorizations not yet settled or released on the chain (ether)",
    labelNames: ["chain_id"],
    registers,
  });
  const coverage = new Gauge({
    aggregator: "max",
    name: "gss_paymaster_deposit_coverage",
    help: "The paymasters' deposits against what they must pay: 0 ok, 1 low (below open reservations + the warn share of the tanks), 2 short (a paymaster cannot pay its open reservations), -1 unknown",
    labelNames: ["chain_id"],
    registers,
  });
  const readiness = new Gauge({
    aggregator: "max",
    name: "gss_readiness_check_status",
    help: "Each readiness check of /health/ready: 0 ok, 1 degraded, 2 down",
    labelNames: ["check"],
    registers,
  });

  const snapshot = async () => [
    ...(await registry.getMetricsAsJSON()),
    ...(await processMetrics().getMetricsAsJSON()),
  ];
  const clusterClient = (options.clusterWorker ?? cluster.isWorker) ? clusterMetricsClient(snapshot) : null;

  return {
    contentType: registry.contentType,
    httpRequest(route, method, statusCode, seconds) {
      requests.inc({ route, method, status_code: String(statusCode) });
      duration.observe({ route, method }, seconds);
    },
    authorizeOutcome: (api, method, code) => outcomes.inc({ api, method, code }),
    reservationBatch: (size) => batches.observe(size),
    watcherLag(chainId, watcher, blocks) {
      const labels = { chain_id: String(chainId), watcher };
      if (blocks === null) lag.remove(labels);
      else lag.set(labels, Number(blocks));
    },
    watcherLeader: (chainId, leading) => leader.set({ chain_id: String(chainId) }, leading ? 1 : 0),
    unattributedSpend: (chainId, entryPoint, wei) =>
      unattributed.set({ chain_id: String(chainId), entry_point: entryPoint }, weiToEther(wei)),
    paymasterDeposit(chainId, entryPoint, wei) {
      const labels = { chain_id: String(chainId), entry_point: entryPoint };
      // An unread deposit is no sample rather than a stale one.
      if (wei === null) deposit.remove(labels);
      else deposit.set(labels, weiToEther(wei));
    },
    gasTanks: (wei) => tanks.set(weiToEther(wei)),
    openReservations: (chainId, wei) => reservations.set({ chain_id: String(chainId) }, weiToEther(wei)),
    depositCoverage: (chainId, state) => coverage.set({ chain_id: String(chainId) }, COVERAGE_VALUE[state]),
    readinessCheck: (check, status) => readiness.set({ check }, CHECK_STATUS_VALUE[status]),
    snapshot,
    async exposition() {
      if (clusterClient) {
        const whole = await clusterClient.exposition();
        if (whole) return whole.text;
      }
      const own = await registry.metrics();
      const process = await processMetrics().metrics();
      const note = clusterClient
        ? "# the cluster's primary did not answer: this worker's metrics only\n"
        : "";
      return `${note}${own.trimEnd()}\n\n${process.trimEnd()}\n`;
    },
  };
}
