import { readFileSync } from "node:fs";
import type { Hex } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { chainSenderCodeResolver, type SenderCodeResolver } from "./accounts/code/resolve.ts";
import { apiKeyResolver } from "./api-keys/resolver.ts";
import { settlementWatcherName } from "./chains/cursors.ts";
import { chainFeeOracle, readingAgeSec } from "./chains/fee-oracle.ts";
import { type ChainClient, createChainClient } from "./chains/rpc.ts";
import { type ChainWatchers, createChainWatchers, rpcErrorsOf } from "./chains/watchers.ts";
import { type Config, liveEntryPoints } from "./config.ts";
import type { Services } from "./context.ts";
import type { Db } from "./db/db.ts";
import { primaryReads, type ReadRouter, readRouter } from "./db/replicas.ts";
import { DEPOSIT_WATCHER } from "./funding/deposit-watcher.ts";
import { depositDeriver, xpubFromLocalSeed } from "./funding/derivation.ts";
import type { ReadinessProbe } from "./health/readiness.ts";
import { localIssuer, oidcVerifier, type TokenVerifier } from "./identity/tokens.ts";
import { reservationBatcher } from "./ledger/batcher.ts";
import { createMetrics, type Metrics, PENDING_DELIVERIES_CAP, type ServedChain } from "./metrics/metrics.ts";
import { authFailureLimiter } from "./rate-limits/failed-auth.ts";
import { memoryRateLimiter, type RateLimiter, redisRateLimiter } from "./rate-limits/limiter.ts";
import { connectRedis } from "./redis/client.ts";
import { refusalRecorder } from "./refusals/recorder.ts";
import { type Maintenance, maintenance } from "./retention/maintenance.ts";
import { loadOrCreateSecret } from "./secrets/key-files.ts";
import { secretsKeyring } from "./secrets/keyring.ts";
import { createSigner } from "./sponsor/signer.ts";
import { approvalGate } from "./webhooks/approval.ts";
import { countPending } from "./webhooks/deliveries.ts";
import { webhookSender } from "./webhooks/egress.ts";
import { relayBacklog } from "./webhooks/relay.ts";
import { type WebhookWorker, webhookWorker } from "./webhooks/worker.ts";

export const VERSION: string = JSON.parse(
  readFileSync(new URL("../package.json", import.meta.url), "utf8"),
).version;

export interface Wired {
  services: Services;
  /** The chain watchers, when asked for (server.ts starts them after listening); null otherwise. */
  watchers: ChainWatchers | null;
  /** The webhook delivery worker; server.ts starts it, tests drive it (drain) or start it. */
  webhooks: WebhookWorker;
  /** Replay retention and ledger checkpoints; server.ts starts it, tests call pass(). */
  maintenance: Maintenance;
  /** Closes what wiring opened (Redis, timers); the database is the caller's. */
  close(): Promise<void>;
}

/** Wires the service's dependencies from configuration and an open database. */
export interface WireOptions {
  /** Namespace of the rate-limit counters in Redis; instances that share it share budgets. */
  rateLimitPrefix?: string;
  overrides?: Partial<Services>;
  /**
   * Create the chain watchers and add their readiness probes (the server does; tests drive
   * watchers themselves). The fee oracle is wired either way (unless overridden) but reads
   * nothing until started: server.ts starts it, and so do tests that run against a chain.
   */
  chainWatchers?: boolean;
}

export async function wireServices(config: Config, db: Db, options: WireOptions = {}): Promise<Wired> {
  const overrides = options.overrides ?? {};
  const redis = config.redis ? connectRedis(config.redis) : null;
  // One namespace per budget in Redis: per key (the prefix itself), per developer, per address.
  const limiter = (namespace: string | null): RateLimiter => {
    if (!redis) return memoryRateLimiter();
    const prefix = options.rateLimitPrefix ?? "gss:rl";
    return redisRateLimiter(redis, namespace ? `${prefix}:${namespace}` : prefix);
  };
  const rateLimiter = limiter(null);
  const developerRateLimiter = limiter("dev");
  const authFailures = authFailureLimiter(limiter("authfail"), config.failedAuthLimit);
  const tokens: TokenVerifier = config.oidc ? oidcVerifier(config.oidc) : await localIssuer(config.dataDir);
  const signerKey =
    config.signerPrivateKey ??
    (loadOrCreateSecret(config.dataDir, "signer.key", () => generatePrivateKey()) as Hex);
  const now = overrides.now ?? Date.now;
  const apiKeys = apiKeyResolver(db, config.keyCacheTtlMs, now);
  const readiness: ReadinessProbe[] = [databaseProbe(db)];
  if (redis) readiness.push(redisProbe(rateLimiter));
  const metrics: Metrics = overrides.metrics ?? createMetrics({ version: VERSION, now });
  const replicas =
    db.kind === "postgres" && config.databaseReadUrls.length > 0
      ? readRouter(db, config.databaseReadUrls, {
          maxLagMs: config.databaseReadMaxLagMs,
          now,
          routed: (target) => metrics.readRouted(target),
          checked: (states) => {
            for (const s of states) metrics.replicaLag(s.index, s.up ? s.lagMs : null);
          },
        })
      : null;
  if (replicas) {
    readiness.push(...replicaProbes(replicas));
    replicas.start();
  }
  metrics.pendingDeliveriesFrom(() => countPending(db, PENDING_DELIVERIES_CAP), now);
  metrics.relayBacklogFrom(() => relayBacklog(db), now);
  const served = servedChains(config);
  metrics.chainsServed(served);
  const signer = createSigner(signerKey);
  const keyring = overrides.keyring ?? secretsKeyring(config);
  const watchers = options.chainWatchers
    ? createChainWatchers(config, db, { metrics, signer: signer.address })
    : null;
  if (watchers) readiness.push(...watchers.probes);
  const feeOracle = overrides.feeOracle ?? chainFeeOracle(config, { now, metrics });
  readiness.push(...feeOracle.probes);
  metrics.feeAgesFrom(() =>
    served.map(({ chainId }) => ({ chainId, ageSec: readingAgeSec(feeOracle.current(chainId), now()) })),
  );
  const egress = webhookSender(config.webhookPrivateTargets);
  const senderCode = overrides.senderCode ?? senderCodeResolverFor(config, now, metrics);
  const services: Services = {
    version: VERSION,
    config,
    db,
    reads: replicas ?? primaryReads(db),
    tokens,
    deposits: depositDeriver(config.depositXpub ?? xpubFromLocalSeed(config.dataDir)),
    apiKeys,
    rateLimiter,
    developerRateLimiter,
    authFailures,
    signer,
    keyring,
    reservations: reservationBatcher(
      db,
      (size) => metrics.reservationBatch(size),
      () => webhooks.kick(),
    ),
    feeOracle,
    senderCode,
    readiness,
    metrics,
    approvals: approvalGate({ db, cacheTtlMs: config.keyCacheTtlMs, now, send: egress, metrics, keyring }),
    refusals: refusalRecorder(db, {
      flushIntervalMs: config.refusalFlushMs,
      detailPerMinute: config.refusalDetailPerMinute,
      onError: () => metrics.refusalFlushFailed(),
    }),
    now,
    ...overrides,
  };
  const webhooks = webhookWorker(db, {
    retry: {
      baseDelayMs: config.webhookRetryBaseMs,
      maxDelayMs: WEBHOOK_MAX_RETRY_DELAY_MS,
      maxAttempts: config.webhookMaxAttempts,
    },
    timeoutMs: config.webhookTimeoutMs,
    pollIntervalMs: config.webhookPollIntervalMs,
    concurrency: config.webhookConcurrency,
    caps: {
      perEndpoint: config.webhookMaxInFlightPerEndpoint,
      perProject: config.webhookMaxInFlightPerProject,
    },
    send: egress,
    metrics,
    keyring,
  });
  const upkeep = maintenance(db, {
    intervalMs: config.maintenanceIntervalMs,
    batchSize: config.retentionBatchSize,
    checkpointEvery: config.checkpointEveryEntries,
    webhookRetentionDays: config.webhookRetentionDays,
    refusalRetentionDays: config.refusalRetentionDays,
    chainOperationRetentionDays: config.chainOperationRetentionDays,
    now,
  });
  return {
    services,
    watchers,
    webhooks,
    maintenance: upkeep,
    async close() {
      await upkeep.stop();
      // The refusals still buffered are written before the database closes (the caller's).
      await services.refusals.stop().catch(() => {});
      await webhooks.stop();
      await watchers?.stop();
      await feeOracle.stop();
      await apiKeys.close();
      await replicas?.close();
      redis?.disconnect();
    },
  };
}

/** The longest wait between two attempts of a webhook delivery. */
const WEBHOOK_MAX_RETRY_DELAY_MS = 6 * 3600 * 1000;

function databaseProbe(db: Db): ReadinessProbe {
  return {
    name: "database",
    async check() {
      try {
        await db.query("SELECT 1");
        return { status: "ok", detail: db.kind };
      } catch {
        return { status: "down", detail: `${db.kind} is not answering` };
      }
    },
  };
}

/**
 * One check per read replica, `replica:<position>`: degraded when it is down or lags past the
 * bound (its reads then go to the primary, so the instance still serves everything).
 */
function replicaProbes(router: ReadRouter): ReadinessProbe[] {
  return router.states().map(({ index }) => ({
    name: `replica:${index}`,
    async check() {
      const state = router.states()[index]!;
      if (state.up && state.detail === undefined) return { status: "ok" as const };
      return {
        status: "degraded" as const,
        detail: `${state.detail ?? "not in use"}; its reads go to the primary`,
      };
    },
  }));
}

function redisProbe(limiter: RateLimiter): ReadinessProbe {
  return {
    name: "redis",
    async check() {
      return (await limiter.healthy())
        ? { status: "ok" }
        : {
            status: "degraded",
            detail: "Redis unreachable: rate limits are counted per instance, in memory",
          };
    },
  };
}

/** One resolver for every active chain, each read through its own RPC client, made on first use. */
/** The chains with a live paymaster, and their watchers' names: the chains the metrics are about. */
function servedChains(config: Config): ServedChain[] {
  return config.chains
    .filter((chain) => chain.active && liveEntryPoints(chain).length > 0)
    .map((chain) => ({
      chainId: chain.chainId,
      watchers: [DEPOSIT_WATCHER, ...liveEntryPoints(chain).map((e) => settlementWatcherName(e.version))],
    }));
}

function senderCodeResolverFor(config: Config, now: () => number, metrics: Metrics): SenderCodeResolver {
  const clients = new Map<number, ChainClient>();
  return chainSenderCodeResolver({
    client(chainId) {
      const chain = config.chains.find((c) => c.chainId === chainId && c.active);
      if (!chain) return null;
      let client = clients.get(chainId);
      if (!client) {
        client = createChainClient(chain.rpcUrl, { onError: rpcErrorsOf(chainId, metrics) });
        clients.set(chainId, client);
      }
      return client;
    },
    now,
    ttlMs: config.senderCodeTtlMs,
  });
}
