/**
 * The service's Prometheus metrics (prom-client), one registry per wired service so that two
 * instances in one process (tests) count apart; the process metrics (CPU, memory, event loop,
 * GC) are the process's and live in one shared registry, added to every exposition.
 *
 * Amounts of wei exceed 2^53 and Prometheus samples are float64, so amounts are exposed as gauges
 * in ether (10^18 wei of the chain's native token: S on Sonic), converted from the exact decimal
 * string: about 15 significant digits, ample for graphs and alerts. They are never read back:
 * the ledger and the parity reports keep exact wei.
 *
 * Everything here is set as things happen, except the pending webhook deliveries: that gauge is
 * read from the store by the scrape itself, from a cached count refreshed at most every 10 s.
 */
import cluster from "node:cluster";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { formatEther } from "viem";
import { clusterMetricsClient } from "./cluster.ts";
import { type PaymasterStakeReading, paymasterStakeGauges } from "./paymaster-stake.ts";

/** The state of a readiness check as a number, for alerting: 0 ok, 1 degraded, 2 down. */
export const CHECK_STATUS_VALUE = { ok: 0, degraded: 1, down: 2 } as const;

/** How the paymasters' deposit compares with what the tanks promise, as a number (see health/deposit-coverage.ts). */
export const COVERAGE_VALUE = { unknown: -1, ok: 0, low: 1, short: 2 } as const;

/**
 * How one attempt to deliver a webhook event ended (webhooks/worker.ts). A closed set on purpose:
 * a label never carries a URL (it may hold a token), an endpoint, a project or a status code.
 */
export const WEBHOOK_ATTEMPT_OUTCOMES = [
  "delivered",
  "http_error",
  "timeout",
  "network_error",
  "refused_private_target",
] as const;
export type WebhookAttemptOutcome = (typeof WEBHOOK_ATTEMPT_OUTCOMES)[number];

/** What one call of a project's approval webhook gave (webhooks/approval.ts), before the fail mode applies. */
export const APPROVAL_CALL_RESULTS = ["approved", "denied", "timeout", "error"] as const;
export type ApprovalCallResult = (typeof APPROVAL_CALL_RESULTS)[number];

/** How an operation the paymaster paid for ended on chain (the EntryPoint's `success` flag). */
export const SETTLEMENT_OUTCOMES = ["success", "reverted"] as const;
export type SettlementOutcome = (typeof SETTLEMENT_OUTCOMES)[number];

/**
 * How a chain RPC call failed (chains/rpc.ts): timeout (no answer in time), unreachable (no HTTP
 * answer: refused, reset, DNS), http_status (an HTTP status other than 2xx), rpc_error (a JSON-RPC
 * error from the node), other.
 */
export const RPC_ERROR_KINDS = ["timeout", "unreachable", "http_status", "rpc_error", "other"] as const;
export type RpcErrorKind = (typeof RPC_ERROR_KINDS)[number];

/**
 * The JSON-RPC methods the service calls; any other is counted as "other", so that the method
 * label stays a short, known list whatever a library starts sending.
 */
export const CHAIN_RPC_METHODS = new Set([
  "eth_blockNumber",
  "eth_call",
  "eth_chainId",
  "eth_getBalance",
  "eth_getBlockByHash",
  "eth_getBlockByNumber",
  "eth_getCode",
  "eth_getLogs",
  "eth_getStorageAt",
  "eth_getTransactionReceipt",
  "eth_maxPriorityFeePerGas",
  "debug_traceBlockByNumber",
]);

/** A chain the service serves, and the names of its watchers (chains/cursors.ts), for zeroed series. */
export interface ServedChain {
  chainId: number;
  watchers: readonly string[];
}

/** What the chain watchers and RPC clients report (a part of Metrics, so that they need no more). */
export type ChainMetrics = Pick<
  Metrics,
  "depositCredited" | "operationSettled" | "reorgReconciled" | "rpcError"
>;

/** The pending-deliveries gauge is read from the store at most this often, however often it is scraped. */
export const PENDING_SAMPLE_MAX_AGE_MS = 10_000;
/** The count behind gss_webhook_deliveries_pending stops here: a bounded read, whatever the backlog. */
export const PENDING_DELIVERIES_CAP = 100_000;
/** How long a scrape waits for that read before it shows the previous value (the read goes on). */
const PENDING_SAMPLE_WAIT_MS = 500;

export interface Metrics {
  readonly contentType: string;
  /** One answered HTTP request: route template (not the raw path), method, status, seconds. */
  httpRequest(route: string, method: string, statusCode: number, seconds: number): void;
  /** The outcome of one authorization request: "ok" or the refusal's stable code. */
  authorizeOutcome(api: "rest" | "rpc", method: string, code: string): void;
  /** How many reservations of one project went to the database in one call (ledger/batcher.ts). */
  reservationBatch(size: number): void;
  /** A lag-tolerant read (db/replicas.ts) and where it was served. */
  readRouted(target: "replica" | "primary"): void;
  /** A read replica's lag bound as last checked, in milliseconds; null while it is down. */
  replicaLag(index: number, ms: number | null): void;
  /** Blocks between a watcher's cursor and the confirmed head; null when unknown (the series is removed). */
  watcherLag(chainId: number, watcher: string, blocks: bigint | null): void;
  /** Whether this instance runs the chain's watchers (leadership.ts). */
  watcherLeader(chainId: number, leading: boolean): void;
  unattributedSpend(chainId: number, entryPoint: string, wei: bigint): void;
  paymasterDeposit(chainId: number, entryPoint: string, wei: bigint | null): void;
  /** The paymaster's stake as last read (metrics/paymaster-stake.ts). */
  paymasterStake(chainId: number, entryPoint: string, reading: PaymasterStakeReading): void;
  /** The sum of every project's tank on one chain (a tank per project and chain, migration 035). */
  gasTanks(chainId: number, wei: bigint): void;
  openReservations(chainId: number, wei: bigint): void;
  depositCoverage(chainId: number, state: keyof typeof COVERAGE_VALUE): void;
  readinessCheck(check: string, status: keyof typeof CHECK_STATUS_VALUE): void;
  /** One attempt of the webhook worker: how it ended and how long the HTTP exchange took. */
  webhookAttempt(outcome: WebhookAttemptOutcome, seconds: number): void;
  /** A delivery that used its last attempt and is now `failed`. */
  webhookGaveUp(): void;
  /** A batch of refusals that could not be written (refusals/recorder.ts); its counts are retried. */
  refusalFlushFailed(): void;
  /**
   * Where the pending-deliveries gauge comes from: `read` (a bounded count in the store) runs
   * when a scrape finds the last value older than PENDING_SAMPLE_MAX_AGE_MS by `now`, one read at
   * a time. Until a read succeeds, and after one fails, the gauge has no sample.
   */
  pendingDeliveriesFrom(read: () => Promise<number>, now?: () => number): void;
  /**
   * Where the sponsored-events relay's backlog comes from (webhooks/relay.ts): read as the pending
   * deliveries are, at most every PENDING_SAMPLE_MAX_AGE_MS, no sample until a read succeeds.
   */
  relayBacklogFrom(read: () => Promise<number>, now?: () => number): void;
  /** One call of an approval webhook: its result and how long it took. */
  approvalCall(result: ApprovalCallResult, seconds: number): void;
  /**
   * The chains this service serves: their per-chain counters (deposits, settlements, reorgs)
   * start at zero, so that rate() and increase() see the first event.
   */
  chainsServed(chains: readonly ServedChain[]): void;
  /** A deposit credited to a gas tank by the deposit watcher. */
  depositCredited(chainId: number, wei: bigint): void;
  /** An operation the paymaster paid, newly recorded by a settlement watcher: its outcome and actual cost. */
  operationSettled(chainId: number, outcome: SettlementOutcome, costWei: bigint): void;
  /** A reorganisation a watcher reconciled: blocks replaced and effects taken back (credits or charges). */
  reorgReconciled(chainId: number, watcher: string, orphanedBlocks: bigint, reversals: number): void;
  /** A chain RPC call that failed, after the client's own retries. */
  rpcError(chainId: number, method: string, kind: RpcErrorKind): void;
  /**
   * Where the fee readings' ages come from, read at scrape time: seconds since each chain's last
   * successful fee reading, Infinity when there has been none.
   */
  feeAgesFrom(read: () => { chainId: number; ageSec: number }[]): void;
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

/**
 * A gauge whose value is read from the store at scrape time (the source given to the returned
 * function, a cachedRead): no sample until a source is given and a read succeeds, nor after one fails.
 */
function storeGauge(
  name: string,
  help: string,
  registers: Registry[],
): (source: () => Promise<number | null>) => void {
  let sample: (() => Promise<number | null>) | null = null;
  new Gauge({
    aggregator: "max",
    name,
    help,
    registers,
    async collect() {
      if (!sample) return;
      const n = await sample();
      if (n === null) this.remove();
      else this.set(n);
    },
  }).remove();
  return (source) => {
    sample = source;
  };
}

/**
 * A number read from the store for a gauge at scrape time, without letting scrapes drive the
 * store: a read starts only when the last one started PENDING_SAMPLE_MAX_AGE_MS ago or more (a
 * failed one included), concurrent scrapes share it, and a scrape waits for it at most
 * PENDING_SAMPLE_WAIT_MS; a slower read completes in the background for the next scrape.
 * Resolves to the last value read, or null when the last read failed or none has finished.
 */
function cachedRead(read: () => Promise<number>, now: () => number): () => Promise<number | null> {
  let value: number | null = null;
  let startedAt: number | null = null;
  let inFlight: Promise<void> | null = null;
  return async () => {
    const t = now();
    if (!inFlight && (startedAt === null || t - startedAt >= PENDING_SAMPLE_MAX_AGE_MS)) {
      startedAt = t;
      inFlight = read()
        .then(
          (n) => {
            value = n;
          },
          () => {
            value = null;
          },
        )
        .finally(() => {
          inFlight = null;
        });
    }
    if (inFlight) {
      let timer: NodeJS.Timeout | undefined;
      const patience = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, PENDING_SAMPLE_WAIT_MS);
        timer.unref();
      });
      await Promise.race([inFlight, patience]);
      clearTimeout(timer);
    }
    return value;
  };
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
export function createMetrics(options: {
  version: string;
  clusterWorker?: boolean;
  /** The service clock, for the age of the last deposit reading. */
  now?: () => number;
}): Metrics {
  const now = options.now ?? Date.now;
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
  const reads = new Counter({
    name: "gss_db_reads_total",
    help: "Lag-tolerant reads (analytics, events, refusals, deposits, funds parity) by where they were served",
    labelNames: ["target"],
    registers,
  });
  const replicaLag = new Gauge({
    aggregator: "max",
    name: "gss_db_replica_lag_seconds",
    help: "Upper bound of each read replica's lag behind the primary (absent while it is down)",
    labelNames: ["replica"],
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
  // When each paymaster's deposit was last read (ms), null before the first success. An unread
  // deposit keeps its last value, and this age says how old it is: alerts on the deposit would
  // otherwise go quiet exactly while the RPC is down.
  const depositReadAt = new Map<string, { labels: Record<string, string>; atMs: number | null }>();
  new Gauge({
    aggregator: "min",
    name: "gss_paymaster_deposit_age_seconds",
    help: "Seconds since the paymaster's deposit was last read from its EntryPoint (+Inf before the first reading); gss_paymaster_deposit_ether keeps the last value read",
    labelNames: ["chain_id", "entry_point"],
    registers,
    collect() {
      const t = now();
      for (const { labels, atMs } of depositReadAt.values())
        this.set(labels, atMs === null ? Number.POSITIVE_INFINITY : Math.max(0, t - atMs) / 1000);
    },
  });
  const paymasterStake = paymasterStakeGauges(registers);
  const tanks = new Gauge({
    aggregator: "max",
    name: "gss_gas_tanks_ether",
    help: "The sum of every project's gas tank on the chain, in its native currency (ether: 1e18 of its smallest unit)",
    labelNames: ["chain_id"],
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

  const attempts = new Counter({
    name: "gss_webhook_delivery_attempts_total",
    help: "Webhook delivery attempts by outcome: delivered (2xx), http_error (any other status, redirects included), timeout, network_error, refused_private_target (WEBHOOK_PRIVATE_TARGETS=refuse)",
    labelNames: ["outcome"],
    registers,
  });
  const attemptDuration = new Histogram({
    name: "gss_webhook_delivery_attempt_duration_seconds",
    help: "Time of one webhook delivery attempt, from sending the request to the receiver's answer or the failure (bounded by WEBHOOK_TIMEOUT_MS)",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const refusalFlushFailures = new Counter({
    name: "gss_refusal_flush_failures_total",
    help: "Batches of refused requests an instance could not write (the database did not answer); their counts are kept for the next batch",
    registers,
  });
  const gaveUp = new Counter({
    name: "gss_webhook_deliveries_failed_total",
    help: "Webhook deliveries that failed for good: their last attempt (WEBHOOK_MAX_ATTEMPTS) failed too",
    registers,
  });
  const pendingSample = storeGauge(
    "gss_webhook_deliveries_pending",
    `Webhook deliveries waiting for an attempt (status pending), counted up to ${PENDING_DELIVERIES_CAP}; read from the store at most every ${PENDING_SAMPLE_MAX_AGE_MS / 1000} s`,
    registers,
  );
  const relayBacklogSample = storeGauge(
    "gss_sponsored_events_behind",
    `Sponsorships of projects with a sponsorship.sponsored cursor whose event the relay has not written yet (migration 055); read from the store at most every ${PENDING_SAMPLE_MAX_AGE_MS / 1000} s`,
    registers,
  );
  const approvals = new Counter({
    name: "gss_approval_webhook_calls_total",
    help: "Calls of projects' approval webhooks by result: approved, denied, timeout (no answer within the project's timeoutMs), error (another status, an unusable answer, a failed or refused connection)",
    labelNames: ["result"],
    registers,
  });
  const approvalDuration = new Histogram({
    name: "gss_approval_webhook_duration_seconds",
    help: "Time of one approval webhook call, until its answer was read or it failed (bounded by the project's timeoutMs)",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers,
  });
  const credited = new Counter({
    name: "gss_deposits_credited_total",
    help: "Deposits credited to gas tanks by the deposit watcher (taken-back credits still count here; see gss_reorg_reversals_total)",
    labelNames: ["chain_id"],
    registers,
  });
  const creditedEther = new Counter({
    name: "gss_deposits_credited_ether_total",
    help: "What those deposits credited (ether: 1e18 wei of the native token; float, not for accounting)",
    labelNames: ["chain_id"],
    registers,
  });
  const settled = new Counter({
    name: "gss_settled_operations_total",
    help: "Operations the paymaster paid on chain, recorded by a settlement watcher, by outcome (success, reverted: the inner call failed, gas still paid)",
    labelNames: ["chain_id", "outcome"],
    registers,
  });
  const settledCost = new Counter({
    name: "gss_settled_gas_cost_ether_total",
    help: "The actual gas cost of those operations, what left the paymaster's deposit (ether)",
    labelNames: ["chain_id", "outcome"],
    registers,
  });
  const reorgs = new Counter({
    name: "gss_chain_reorgs_total",
    help: "Reorganisations deeper than the confirmation depth that a chain watcher reconciled",
    labelNames: ["chain_id", "watcher"],
    registers,
  });
  const reorgedBlocks = new Counter({
    name: "gss_chain_reorged_blocks_total",
    help: "Blocks a watcher had applied that those reorganisations replaced",
    labelNames: ["chain_id", "watcher"],
    registers,
  });
  const reversals = new Counter({
    name: "gss_reorg_reversals_total",
    help: "Effects taken back by those reorganisations: deposit credits (watcher deposits) or settlement charges (settlement watchers)",
    labelNames: ["chain_id", "watcher"],
    registers,
  });
  const rpcErrors = new Counter({
    name: "gss_chain_rpc_errors_total",
    help: "Chain RPC calls that failed after the client's retries, by JSON-RPC method and kind (timeout, unreachable, http_status, rpc_error, other)",
    labelNames: ["chain_id", "method", "kind"],
    registers,
  });
  let feeAges: (() => { chainId: number; ageSec: number }[]) | null = null;
  new Gauge({
    aggregator: "max",
    name: "gss_fee_reading_age_seconds",
    help: "Seconds since the fee oracle's last successful reading of the chain's gas prices (+Inf before the first); authorize refuses the chain past its FEE_MAX_AGE_MS",
    labelNames: ["chain_id"],
    registers,
    collect() {
      if (!feeAges) return;
      this.reset();
      for (const { chainId, ageSec } of feeAges()) this.set({ chain_id: String(chainId) }, ageSec);
    },
  });

  // Every outcome is a series from the start, so that rate() and increase() see the first one.
  for (const outcome of WEBHOOK_ATTEMPT_OUTCOMES) attempts.inc({ outcome }, 0);
  for (const result of APPROVAL_CALL_RESULTS) approvals.inc({ result }, 0);

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
    readRouted: (target) => reads.inc({ target }),
    replicaLag(index, ms) {
      if (ms === null) replicaLag.remove({ replica: String(index) });
      else replicaLag.set({ replica: String(index) }, ms / 1000);
    },
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
      const key = `${labels.chain_id}/${entryPoint}`;
      // An unread deposit keeps its last value; its age (above) tells how old that is.
      if (wei === null) {
        if (!depositReadAt.has(key)) depositReadAt.set(key, { labels, atMs: null });
        return;
      }
      deposit.set(labels, weiToEther(wei));
      depositReadAt.set(key, { labels, atMs: now() });
    },
    paymasterStake,
    gasTanks: (chainId, wei) => tanks.set({ chain_id: String(chainId) }, weiToEther(wei)),
    openReservations: (chainId, wei) => reservations.set({ chain_id: String(chainId) }, weiToEther(wei)),
    depositCoverage: (chainId, state) => coverage.set({ chain_id: String(chainId) }, COVERAGE_VALUE[state]),
    readinessCheck: (check, status) => readiness.set({ check }, CHECK_STATUS_VALUE[status]),
    webhookAttempt(outcome, seconds) {
      attempts.inc({ outcome });
      attemptDuration.observe(seconds);
    },
    webhookGaveUp: () => gaveUp.inc(),
    refusalFlushFailed: () => refusalFlushFailures.inc(),
    pendingDeliveriesFrom(read, now = Date.now) {
      pendingSample(cachedRead(read, now));
    },
    relayBacklogFrom(read, now = Date.now) {
      relayBacklogSample(cachedRead(read, now));
    },
    approvalCall(result, seconds) {
      approvals.inc({ result });
      approvalDuration.observe(seconds);
    },
    chainsServed(chains) {
      for (const { chainId, watchers } of chains) {
        const chain_id = String(chainId);
        credited.inc({ chain_id }, 0);
        creditedEther.inc({ chain_id }, 0);
        for (const outcome of SETTLEMENT_OUTCOMES) {
          settled.inc({ chain_id, outcome }, 0);
          settledCost.inc({ chain_id, outcome }, 0);
        }
        for (const watcher of watchers) {
          reorgs.inc({ chain_id, watcher }, 0);
          reorgedBlocks.inc({ chain_id, watcher }, 0);
          reversals.inc({ chain_id, watcher }, 0);
        }
      }
    },
    depositCredited(chainId, wei) {
      const chain_id = String(chainId);
      credited.inc({ chain_id });
      creditedEther.inc({ chain_id }, weiToEther(wei));
    },
    operationSettled(chainId, outcome, costWei) {
      const labels = { chain_id: String(chainId), outcome };
      settled.inc(labels);
      settledCost.inc(labels, weiToEther(costWei));
    },
    reorgReconciled(chainId, watcher, orphanedBlocks, reversed) {
      const labels = { chain_id: String(chainId), watcher };
      reorgs.inc(labels);
      reorgedBlocks.inc(labels, Number(orphanedBlocks));
      reversals.inc(labels, reversed);
    },
    rpcError(chainId, method, kind) {
      rpcErrors.inc({
        chain_id: String(chainId),
        method: CHAIN_RPC_METHODS.has(method) ? method : "other",
        kind,
      });
    },
    feeAgesFrom(read) {
      feeAges = read;
    },
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
