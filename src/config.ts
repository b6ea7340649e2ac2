import { isIP } from "node:net";
import { availableParallelism } from "node:os";
import { type Address, type Hex, isAddress, isHex } from "viem";
import { DEFAULT_MIN_STAKE_WEI, ERC7562_MIN_UNSTAKE_DELAY_SEC } from "./paymaster/stake.ts";
import { decodeKey } from "./secrets/envelope.ts";
import { DEFAULT_PRE_VERIFICATION_BOUNDS, type PreVerificationBounds } from "./sponsor/pre-verification.ts";

/**
 * The one reader of the environment. Everything is validated here, once, at boot; the rest of the
 * service receives a typed, frozen Config.
 */

export type EntryPointVersion = "0.7" | "0.8";

/** One EntryPoint of a chain and our paymaster deployed for it. */
export interface EntryPointConfig {
  version: EntryPointVersion;
  entryPoint: Address;
  /** The SponsorPaymaster build for this EntryPoint; null: not deployed, the EntryPoint is not served. */
  paymaster: Address | null;
}

/** An EntryPoint that is served: a paymaster is configured for it. */
export type LiveEntryPoint = EntryPointConfig & { paymaster: Address };

export interface ChainConfig {
  chainId: number;
  name: string;
  nativeCurrency: { name: string; symbol: string; decimals: number };
  rpcUrl: string;
  /** EntryPoint v0.7 (the pair `/sponsor/authorize` signs for); the same as entryPoints' "0.7" entry. */
  entryPoint: Address;
  /** SponsorPaymaster for EntryPoint v0.7, or null; the same as entryPoints' "0.7" entry. */
  paymaster: Address | null;
  /**
   * Every EntryPoint the configuration names, v0.7 then v0.8, each with its own paymaster
   * deployment. The live ones (paymaster set) are the ones sponsored, watched and reported.
   */
  entryPoints: EntryPointConfig[];
  confirmations: number;
  /**
   * Ceiling of the fee oracle: no authorization allows a maxFeePerGas above it, whatever the
   * chain charges, so one reservation never costs more than its gas × this. (In v1 it was the
   * fixed price of every reservation; the environment variable keeps its name.)
   */
  maxFeePerGasWei: bigint;
  /** Floor of the fee oracle: the maxFeePerGas ceiling of an authorization is never below it. */
  minFeePerGasWei: bigint;
  /** Headroom on the base fee, in percent, for the blocks between authorize and inclusion. */
  feeMarginPercent: number;
  /** How often the fee oracle reads the base fee and priority fee: about one block time. */
  feeRefreshMs: number;
  /** A fee reading older than this is stale and authorize refuses the chain with 503. */
  feeMaxAgeMs: number;
  /**
   * Served by this deployment: listed in CHAINS. config.chains holds only those, so it is true
   * for every entry; whether the chain's RPC answers is the fee oracle's to say.
   */
  active: boolean;
  /** How often the chain watchers (settlement, deposits) poll the RPC. */
  pollIntervalMs: number;
  /** Where the watchers begin when they have no cursor yet; null = the block before the oldest record that matters (start-block.ts). */
  startBlock: bigint | null;
  /**
   * The stake the chain's bundlers require of a paymaster that uses its storage in validation
   * (ERC-7562's MIN_STAKE_VALUE, set per chain): below it readiness reports the paymaster degraded.
   */
  paymasterMinStakeWei: bigint;
  /** The unstake delay those bundlers require (ERC-7562's MIN_UNSTAKE_DELAY), in seconds. */
  paymasterMinUnstakeDelaySec: number;
}

/** A Redis node or a Sentinel, as `host:port`. */
export interface RedisEndpoint {
  host: string;
  port: number;
}

/**
 * How to reach Redis. REDIS_URL alone names one server. With REDIS_CLUSTER_NODES the service
 * speaks the cluster protocol to those seeds; with REDIS_SENTINELS it asks the Sentinels for the
 * master REDIS_SENTINEL_NAME. In both cases REDIS_URL, when set, supplies only the scheme
 * (`rediss:` = TLS), the user and password, and (Sentinel) the database number; its host is not used.
 */
export type RedisConfig = (
  | { mode: "standalone"; url: string }
  | { mode: "cluster"; url: string | null; nodes: RedisEndpoint[] }
  | {
      mode: "sentinel";
      url: string | null;
      sentinels: RedisEndpoint[];
      masterName: string;
      /** The Sentinels' own password (requirepass of the Sentinel processes), if they have one. */
      sentinelPassword: string | null;
    }
) & {
  /** REDIS_COMMAND_TIMEOUT_MS: the bound on one command on one node (500 ms when absent). */
  commandTimeoutMs?: number;
};

export interface OidcConfig {
  issuer: string;
  audience: string;
  jwksUrl: string;
}

/** How the web dashboard (src/dashboard/) signs developers in. */
export interface DashboardConfig {
  /**
   * The dashboard's client id at the identity provider (a public client: authorization code with
   * PKCE from the browser); null: the dashboard offers no provider sign-in.
   */
  oidcClientId: string | null;
  /** Scopes the dashboard asks the provider for. */
  oidcScope: string;
  /**
   * Who may use the development sign-in (POST /auth/dev-token, only with the local issuer and
   * never in production): `loopback` clients only, `any` client, or `off`.
   */
  devSignIn: "loopback" | "any" | "off";
}

export interface Config {
  env: "development" | "production" | "test";
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  /**
   * Streaming replicas of DATABASE_URL for reads that tolerate lag (src/db/replicas.ts): the
   * analytics, the events list, the refusal log, deposit history and the funds parity report.
   * Empty: every read goes to the primary.
   */
  databaseReadUrls: readonly string[];
  /** A replica further behind the primary than this is skipped, and its reads go to the primary. */
  databaseReadMaxLagMs: number;
  /** REDIS_URL as given (a standalone server, or the credentials and TLS of a cluster or Sentinel). */
  redisUrl: string | null;
  /** Where the shared counters live: one server, a Redis Cluster, or a master found through Sentinel; null = in memory. */
  redis: RedisConfig | null;
  signerPrivateKey: Hex | null;
  /**
   * The key that seals stored secrets (webhook and approval signing secrets) with AES-256-GCM
   * (src/secrets/); null: a key generated into DATA_DIR, which production refuses.
   */
  secretsEncryptionKey: Buffer | null;
  /** Older keys, still accepted to open what they sealed until `npm run secrets -- rotate` re-seals it. */
  secretsEncryptionKeysPrevious: readonly Buffer[];
  oidc: OidcConfig | null;
  dashboard: DashboardConfig;
  depositXpub: string | null;
  chains: ChainConfig[];
  logLevel: string;
  /**
   * One "request completed" line in this many for requests answered below 400 without a refusal
   * code (1: every request). Errors and refusals are always logged (REQUEST_LOG_EVERY).
   */
  requestLogEvery: number;
  /** Interval at which cached API-key records are re-read, bounding how long a revoked key lives. */
  keyCacheTtlMs: number;
  /**
   * How far validAfter is set back from now. A bundler simulates at the latest block, whose
   * timestamp trails the wall clock by up to a block time (and clocks drift), so an
   * authorization valid from "now" could be refused as not yet due.
   */
  clockSkewSec: number;
  /**
   * The allowances behind the preVerificationGas ceiling (sponsor/pre-verification.ts): the
   * largest inner call data of a call authorization and the largest account signature, in bytes.
   */
  preVerification: PreVerificationBounds;
  /** How long a sender's resolved code is trusted before it is read again (accounts/code). */
  senderCodeTtlMs: number;
  /** Developers (by verified email) who may read service-wide reports such as chain parity. */
  operatorEmails: readonly string[];
  // Bounds on what one developer or one client address can make the service do.
  /** Organizations one developer may create (each one a slug and a membership table). */
  maxOrgsPerDeveloper: number;
  /** Projects one organization may hold (each one a deposit address the watchers scan). */
  maxProjectsPerOrg: number;
  /** Requests per minute one developer may make with tokens, counted like a key's rateLimit. */
  developerRateLimit: number;
  /** Failed authentications per minute one client address may cause before 429 (valid keys pass). */
  failedAuthLimit: number;
  /**
   * Longest wait for a row lock (PostgreSQL lock_timeout) before the request gives up with 503
   * and Retry-After, instead of queueing behind a stuck transaction until statement_timeout.
   */
  dbLockTimeoutMs: number;
  // Running it for real: observability, readiness and watcher leadership.
  /** Required as `Authorization: Bearer <token>` by GET /metrics; null = the endpoint is open. */
  metricsToken: string | null;
  /**
   * Which peers may set X-Forwarded-For (Fastify's trustProxy): false = none, a hop count, or
   * addresses and CIDR ranges of the load balancers.
   */
  trustProxy: false | number | readonly string[];
  /** How often readiness is evaluated in the background (transition logs, metrics); 0 = on request only. */
  readinessIntervalMs: number;
  /** How often an instance that does not lead a chain's watchers tries to take over. */
  watcherLeaderRetryMs: number;
  /**
   * Readiness warns when a chain's paymaster deposits fall below the open reservations plus this
   * share of the gas tanks, in percent (before they run short of what was promised).
   */
  depositWarnPercent: number;
  // The process: shutdown, start-up, production safety, cluster mode (src/process/).
  /** Longest graceful shutdown (drain requests, stop watchers, close stores); past it, exit 1. */
  shutdownTimeoutMs: number;
  /** How long start-up keeps retrying an unreachable database (exponential backoff) before it gives up. */
  dbConnectTimeoutSec: number;
  /** Production only: run with a generated signer key, a generated deposit seed or the embedded store (warned). */
  allowInsecureDefaults: boolean;
  /** HTTP worker processes (node:cluster); 1 = a single process, no cluster. WORKERS=auto is one per core. */
  workers: number;
  // Webhooks (src/webhooks/): event delivery from the outbox.
  /** Bound on one delivery attempt (connect, send, answer). */
  webhookTimeoutMs: number;
  /** Attempts per delivery, the first included, before it is marked failed. */
  webhookMaxAttempts: number;
  /** The delay after a first failed attempt; it doubles with each further one (jittered, at most 6 h). */
  webhookRetryBaseMs: number;
  /** How often the delivery worker looks for due deliveries when idle. */
  webhookPollIntervalMs: number;
  /** Deliveries in flight at once per instance: the worker's slots, each refilled as it frees. */
  webhookConcurrency: number;
  /**
   * Deliveries in flight at once per instance for one endpoint, and for one project. The project's
   * cap stays below webhookConcurrency, so one project's slow or dead receivers always leave
   * slots to the others (webhooks/worker.ts).
   */
  webhookMaxInFlightPerEndpoint: number;
  webhookMaxInFlightPerProject: number;
  /**
   * `refuse`: webhooks (events and approval) are never sent to loopback, private, link-local or
   * other non-public addresses, checked after DNS resolution (webhooks/egress.ts); `allow`: they
   * may be (a receiver on a laptop). Default: refuse in production, allow otherwise.
   */
  webhookPrivateTargets: "refuse" | "allow";
  /**
   * Days a finished delivery (with its attempt log) and an outbox event are kept before the upkeep
   * job removes them (src/retention/webhooks.ts); deliveries still pending are never removed.
   */
  webhookRetentionDays: number;
  // Refusals (src/refusals): buffered per instance, written in batches.
  /** Longest wait before an instance writes the refusals it has buffered. */
  refusalFlushMs: number;
  /** Refusals kept with their detail per project and minute on one instance; the rest are only counted. */
  refusalDetailPerMinute: number;
  /** Days a detailed refusal is kept before the upkeep job removes it; the daily counts stay. */
  refusalRetentionDays: number;
  /**
   * Days a fully billed paid operation keeps its own chain_operations row before the upkeep job
   * folds it into its paymaster's totals (src/retention/chain-operations.ts).
   */
  chainOperationRetentionDays: number;
  // Upkeep (src/retention/maintenance.ts): replay and webhook retention, ledger checkpoints.
  /** Between two passes of the upkeep job; 0 disables it. */
  maintenanceIntervalMs: number;
  /** Rows per retention batch (one short transaction each): replays forgotten, webhook deliveries or events removed. */
  retentionBatchSize: number;
  /** New ledger entries after a project's latest checkpoint that call for the next one. */
  checkpointEveryEntries: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const ENTRYPOINT_V07 = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
const ENTRYPOINT_V08 = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108";
/** What a chain built into the service brings: every setting but these has the same default everywhere. */
interface BuiltInChain {
  chainId: number;
  name: string;
  nativeCurrency: { name: string; symbol: string; decimals: number };
  defaultRpcUrl: string;
}

const BUILT_IN_CHAINS: readonly BuiltInChain[] = [
  {
    chainId: 14601,
    name: "Sonic Testnet",
    nativeCurrency: { name: "Sonic", symbol: "S", decimals: 18 },
    defaultRpcUrl: "https://rpc.testnet.soniclabs.com",
  },
  {
    chainId: 146,
    name: "Sonic",
    nativeCurrency: { name: "Sonic", symbol: "S", decimals: 18 },
    defaultRpcUrl: "https://rpc.soniclabs.com",
  },
];

/**
 * The largest chain id CHAINS accepts. The tables keep chain_id as a PostgreSQL `integer`, so a
 * larger id would pass the boot and then fail on the first row written for it.
 */
const MAX_CHAIN_ID = 2 ** 31 - 1;
/** Each served chain runs its own watchers and fee oracle loop: a bound on what one setting starts. */
const MAX_CHAINS = 64;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = <T>(name: string, parse: (raw: string) => T, fallback: T): T => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    try {
      return parse(raw);
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
      return fallback;
    }
  };

  const nodeEnv = read("NODE_ENV", (v) => oneOf(v, ["development", "production", "test"]), "development");
  const config: Config = {
    env: nodeEnv as Config["env"],
    port: read("PORT", (v) => intIn(v, 0, 65535), 3000),
    host: read("HOST", (v) => v, "0.0.0.0"),
    dataDir: read("DATA_DIR", (v) => v, "./data"),
    databaseUrl: read("DATABASE_URL", url(["postgres:", "postgresql:"]), null),
    databaseReadUrls: read("DATABASE_READ_URL", urlList(["postgres:", "postgresql:"], 8), []),
    databaseReadMaxLagMs: read("DATABASE_READ_MAX_LAG_MS", (v) => intIn(v, 0, 600_000), 2000),
    redisUrl: read("REDIS_URL", url(["redis:", "rediss:"]), null),
    redis: null,
    signerPrivateKey: read("SIGNER_PRIVATE_KEY", privateKey, null),
    secretsEncryptionKey: read("SECRETS_ENCRYPTION_KEY", decodeKey, null),
    secretsEncryptionKeysPrevious: read("SECRETS_ENCRYPTION_KEYS_PREVIOUS", keyList, []),
    oidc: readOidc(env, nodeEnv === "production", problems),
    dashboard: {
      oidcClientId: read("DASHBOARD_OIDC_CLIENT_ID", (v) => printable(v, 256), null),
      oidcScope: read("DASHBOARD_OIDC_SCOPE", (v) => printable(v, 512, true), "openid email profile"),
      devSignIn: read("DASHBOARD_DEV_SIGNIN", (v) => oneOf(v, ["loopback", "any", "off"]), "loopback") as
        | "loopback"
        | "any"
        | "off",
    },
    depositXpub: read("DEPOSIT_XPUB", xpub, null),
    chains: read("CHAINS", chainIdList, [14601]).map((chainId) => readChain(chainId, env, read, problems)),
    logLevel: read("LOG_LEVEL", (v) => oneOf(v, LOG_LEVELS), "info"),
    requestLogEvery: read("REQUEST_LOG_EVERY", (v) => intIn(v, 1, 1_000_000), 1),
    keyCacheTtlMs: read("KEY_CACHE_TTL_MS", (v) => intIn(v, 0, 5000), 2000),
    clockSkewSec: read("CLOCK_SKEW_SEC", (v) => intIn(v, 0, 3600), 60),
    preVerification: {
      callDataBytes: read(
        "MAX_CALL_DATA_BYTES",
        (v) => intIn(v, 4, 128 * 1024),
        DEFAULT_PRE_VERIFICATION_BOUNDS.callDataBytes,
      ),
      signatureBytes: read(
        "MAX_SIGNATURE_BYTES",
        (v) => intIn(v, 65, 16 * 1024),
        DEFAULT_PRE_VERIFICATION_BOUNDS.signatureBytes,
      ),
    },
    senderCodeTtlMs: read("SENDER_CODE_TTL_MS", (v) => intIn(v, 0, 3_600_000), 60_000),
    operatorEmails: read("OPERATOR_EMAILS", emailList, []),
    maxOrgsPerDeveloper: read("MAX_ORGS_PER_DEVELOPER", (v) => intIn(v, 1, 100_000), 20),
    maxProjectsPerOrg: read("MAX_PROJECTS_PER_ORG", (v) => intIn(v, 1, 100_000), 100),
    developerRateLimit: read("DEVELOPER_RATE_LIMIT", (v) => intIn(v, 1, 1_000_000), 600),
    failedAuthLimit: read("FAILED_AUTH_LIMIT", (v) => intIn(v, 1, 1_000_000), 60),
    dbLockTimeoutMs: read("DB_LOCK_TIMEOUT_MS", (v) => intIn(v, 10, 60_000), 2000),
    metricsToken: read("METRICS_TOKEN", bearerToken, null),
    trustProxy: read("TRUST_PROXY", trustProxy, false),
    readinessIntervalMs: read("READINESS_INTERVAL_MS", (v) => intIn(v, 0, 3_600_000), 5000),
    watcherLeaderRetryMs: read("WATCHER_LEADER_RETRY_MS", (v) => intIn(v, 50, 600_000), 3000),
    depositWarnPercent: read("PAYMASTER_DEPOSIT_WARN_PERCENT", (v) => intIn(v, 0, 100_000), 100),
    shutdownTimeoutMs: read("SHUTDOWN_TIMEOUT_MS", (v) => intIn(v, 100, 600_000), 10_000),
    dbConnectTimeoutSec: read("DB_CONNECT_TIMEOUT_SEC", (v) => intIn(v, 0, 3600), 30),
    allowInsecureDefaults: read("ALLOW_INSECURE_DEFAULTS", boolean, false),
    workers: read("WORKERS", workerCount, 1),
    webhookTimeoutMs: read("WEBHOOK_TIMEOUT_MS", (v) => intIn(v, 100, 30_000), 10_000),
    webhookMaxAttempts: read("WEBHOOK_MAX_ATTEMPTS", (v) => intIn(v, 1, 30), 15),
    webhookRetryBaseMs: read("WEBHOOK_RETRY_BASE_MS", (v) => intIn(v, 10, 3_600_000), 10_000),
    webhookPollIntervalMs: read("WEBHOOK_POLL_INTERVAL_MS", (v) => intIn(v, 50, 60_000), 1000),
    webhookConcurrency: read("WEBHOOK_CONCURRENCY", (v) => intIn(v, 2, 256), 64),
    webhookMaxInFlightPerEndpoint: read("WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT", (v) => intIn(v, 1, 255), 8),
    webhookMaxInFlightPerProject: read("WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT", (v) => intIn(v, 1, 255), 16),
    webhookPrivateTargets: read(
      "WEBHOOK_PRIVATE_TARGETS",
      (v) => oneOf(v, ["refuse", "allow"]),
      nodeEnv === "production" ? "refuse" : "allow",
    ) as "refuse" | "allow",
    webhookRetentionDays: read("WEBHOOK_RETENTION_DAYS", (v) => intIn(v, 1, 3650), 30),
    refusalFlushMs: read("REFUSAL_FLUSH_MS", (v) => intIn(v, 10, 60_000), 1000),
    refusalDetailPerMinute: read("REFUSAL_DETAIL_PER_MINUTE", (v) => intIn(v, 0, 10_000), 20),
    refusalRetentionDays: read("REFUSAL_RETENTION_DAYS", (v) => intIn(v, 1, 3650), 14),
    chainOperationRetentionDays: read("CHAIN_OPERATION_RETENTION_DAYS", (v) => intIn(v, 1, 3650), 7),
    maintenanceIntervalMs: read("MAINTENANCE_INTERVAL_MS", (v) => intIn(v, 0, 3_600_000), 60_000),
    retentionBatchSize: read("RETENTION_BATCH_SIZE", (v) => intIn(v, 1, 100_000), 1000),
    checkpointEveryEntries: read("CHECKPOINT_EVERY_ENTRIES", (v) => intIn(v, 1, 10_000_000), 10_000),
  };
  config.redis = readRedis(config.redisUrl, read, problems);
  // A project allowed every slot could hold them all while its receivers hang (issue 20).
  if (config.webhookMaxInFlightPerProject >= config.webhookConcurrency) {
    problems.push("WEBHOOK_MAX_IN_FLIGHT_PER_PROJECT: must be below WEBHOOK_CONCURRENCY");
  }
  if (config.databaseReadUrls.length > 0 && config.databaseUrl === null) {
    problems.push("DATABASE_READ_URL: needs DATABASE_URL (the embedded store has no replicas)");
  }
  if (problems.length > 0) {
    throw new ConfigError(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
  }
  return Object.freeze(config);
}

function readRedis(
  redisUrl: string | null,
  read: <T>(name: string, parse: (raw: string) => T, fallback: T) => T,
  problems: string[],
): RedisConfig | null {
  const nodes = read("REDIS_CLUSTER_NODES", endpointList, null);
  const sentinels = read("REDIS_SENTINELS", endpointList, null);
  const masterName = read("REDIS_SENTINEL_NAME", (v) => printable(v, 128), null);
  // Never echoed, like every secret here.
  const sentinelPassword = read("REDIS_SENTINEL_PASSWORD", (v) => printable(v, 512), null);
  const commandTimeoutMs = read("REDIS_COMMAND_TIMEOUT_MS", (v) => intIn(v, 10, 60_000), 500);
  if (nodes && sentinels) {
    problems.push(
      "REDIS_CLUSTER_NODES and REDIS_SENTINELS: set one of them (a Redis Cluster, or a master found through Sentinel), not both",
    );
    return null;
  }
  if (sentinels && !masterName)
    problems.push("REDIS_SENTINELS needs REDIS_SENTINEL_NAME (the master's name)");
  if (!sentinels && masterName) problems.push("REDIS_SENTINEL_NAME needs REDIS_SENTINELS (host:port list)");
  if (!sentinels && sentinelPassword) problems.push("REDIS_SENTINEL_PASSWORD needs REDIS_SENTINELS");
  if (nodes) {
    // A cluster serves database 0 only (SELECT is refused); a number in the URL would be ignored silently.
    const db = redisUrl ? new URL(redisUrl).pathname.replace(/^\//, "") : "";
    if (db !== "" && db !== "0")
      problems.push("REDIS_URL: a Redis Cluster has only database 0 (drop the path)");
    return { mode: "cluster", url: redisUrl, nodes, commandTimeoutMs };
  }
  if (sentinels && masterName) {
    return { mode: "sentinel", url: redisUrl, sentinels, masterName, sentinelPassword, commandTimeoutMs };
  }
  return redisUrl ? { mode: "standalone", url: redisUrl, commandTimeoutMs } : null;
}

/** Comma-separated `host:port` (an IPv6 address in brackets), at most 64; named by position. */
function endpointList(v: string): RedisEndpoint[] {
  const entries = v
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  if (entries.length === 0 || entries.length > 64) throw new Error("must list 1 to 64 host:port entries");
  return entries.map((entry, i) => {
    const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
    const port = match ? Number(match[2]) : 0;
    if (!match || port < 1 || port > 65535) throw new Error(`entry ${i + 1} must be host:port`);
    return { host: match[1]!.replace(/^\[|\]$/g, ""), port };
  });
}

/**
 * CHAINS: the chain ids this deployment serves, comma-separated, in order (the first is the home
 * chain of projects created from then on). Chain ids are public, so a bad entry is quoted.
 */
function chainIdList(v: string): number[] {
  const entries = v.split(",").map((e) => e.trim());
  if (entries.length > MAX_CHAINS) throw new Error(`must list at most ${MAX_CHAINS} chain ids`);
  const ids: number[] = [];
  for (const [i, entry] of entries.entries()) {
    const id = /^\d{1,16}$/.test(entry) ? Number(entry) : 0;
    if (id < 1 || id > MAX_CHAIN_ID) {
      const shown = /^[!-~]{1,20}$/.test(entry) ? ` ("${entry}")` : "";
      throw new Error(`entry ${i + 1}${shown} is not a chain id (an integer from 1 to ${MAX_CHAIN_ID})`);
    }
    if (ids.includes(id)) throw new Error(`chain ${id} is listed twice`);
    ids.push(id);
  }
  return ids;
}

/**
 * One chain of CHAINS. A built-in chain has a default for every setting; any other chain must be
 * given its name, RPC URL and currency symbol, and shares the other defaults with the built-ins.
 */
function readChain(
  chainId: number,
  env: Env,
  read: <T>(name: string, parse: (raw: string) => T, fallback: T) => T,
  problems: string[],
): ChainConfig {
  const p = `CHAIN_${chainId}_`;
  const entryPoints = readEntryPoints(p, read, problems);
  const chain: ChainConfig = {
    chainId,
    ...readIdentity(chainId, env, read, problems),
    entryPoint: entryPoints[0]!.entryPoint,
    paymaster: entryPoints[0]!.paymaster,
    entryPoints,
    confirmations: read(`${p}CONFIRMATIONS`, (v) => intIn(v, 0, 1000), 2),
    maxFeePerGasWei: read(`${p}MAX_FEE_PER_GAS_WEI`, positiveBigint, 200_000_000_000n),
    // 1 wei, not a guess at the chain's market: a floor above the market would raise every
    // reservation (the over-reservation the oracle exists to end), and the margin already gives
    // headroom. Its one job by default is to keep the fee ceiling above zero when a node answers
    // 0 for both the base fee and the priority fee; an operator who knows a chain's minimum
    // gas price sets that here.
    minFeePerGasWei: read(`${p}MIN_FEE_PER_GAS_WEI`, positiveBigint, 1n),
    feeMarginPercent: read(`${p}FEE_MARGIN_PERCENT`, (v) => intIn(v, 0, 1000), 50),
    feeRefreshMs: read(`${p}FEE_REFRESH_MS`, (v) => intIn(v, 50, 600_000), 1000),
    feeMaxAgeMs: read(`${p}FEE_MAX_AGE_MS`, (v) => intIn(v, 100, 3_600_000), 30_000),
    // Served here: config.chains holds exactly the chains of CHAINS.
    active: true,
    pollIntervalMs: read(`${p}POLL_INTERVAL_MS`, (v) => intIn(v, 50, 600_000), 2000),
    startBlock: read(`${p}START_BLOCK`, (v) => BigInt(intIn(v, 0, Number.MAX_SAFE_INTEGER)), null),
    paymasterMinStakeWei: read(`${p}PAYMASTER_MIN_STAKE_WEI`, nonNegativeBigint, DEFAULT_MIN_STAKE_WEI),
    // The EntryPoint keeps the delay in a uint32.
    paymasterMinUnstakeDelaySec: read(
      `${p}PAYMASTER_MIN_UNSTAKE_DELAY_SEC`,
      (v) => intIn(v, 0, 2 ** 32 - 1),
      ERC7562_MIN_UNSTAKE_DELAY_SEC,
    ),
  };
  if (chain.minFeePerGasWei > chain.maxFeePerGasWei) {
    problems.push(`${p}MIN_FEE_PER_GAS_WEI: must not exceed ${p}MAX_FEE_PER_GAS_WEI`);
  }
  // One slow or failed refresh must not turn the chain stale: leave room for at least two.
  if (chain.feeMaxAgeMs < 2 * chain.feeRefreshMs) {
    problems.push(`${p}FEE_MAX_AGE_MS: must be at least twice ${p}FEE_REFRESH_MS`);
  }
  return chain;
}

/**
 * What a chain is called, what it pays gas in and where its node is: from the built-in entry,
 * each part overridable, or (a chain not built in) from its settings, of which the name, the RPC
 * URL and the currency symbol are required.
 */
function readIdentity(
  chainId: number,
  env: Env,
  read: <T>(name: string, parse: (raw: string) => T, fallback: T) => T,
  problems: string[],
): Pick<ChainConfig, "name" | "nativeCurrency" | "rpcUrl"> {
  const p = `CHAIN_${chainId}_`;
  const builtIn = BUILT_IN_CHAINS.find((c) => c.chainId === chainId);
  if (!builtIn) {
    for (const name of [`${p}NAME`, `${p}RPC_URL`, `${p}CURRENCY_SYMBOL`]) {
      if (env[name] === undefined || env[name] === "") {
        problems.push(`${name}: required, as chain ${chainId} is in CHAINS and is not built in`);
      }
    }
  }
  // A chain that is not built in and lacks a required setting gets "" for it; the boot stops on
  // the problem above before anything reads the value.
  const symbol = read(`${p}CURRENCY_SYMBOL`, (v) => printable(v, 11), builtIn?.nativeCurrency.symbol ?? "");
  return {
    name: read(`${p}NAME`, (v) => printable(v, 64, true), builtIn?.name ?? ""),
    nativeCurrency: {
      name: read(`${p}CURRENCY_NAME`, (v) => printable(v, 64, true), builtIn?.nativeCurrency.name ?? symbol),
      symbol,
      decimals: read(`${p}CURRENCY_DECIMALS`, (v) => intIn(v, 0, 36), builtIn?.nativeCurrency.decimals ?? 18),
    },
    rpcUrl: read(`${p}RPC_URL`, url(["http:", "https:", "ws:", "wss:"]), builtIn?.defaultRpcUrl ?? ""),
  };
}

/**
 * The chain's EntryPoints: v0.7 from CHAIN_<id>_ENTRYPOINT_ADDRESS / CHAIN_<id>_PAYMASTER_ADDRESS
 * (the names they had before v0.8), v0.8 from CHAIN_<id>_ENTRYPOINT_V08_ADDRESS /
 * CHAIN_<id>_PAYMASTER_V08_ADDRESS. The EntryPoints default to their canonical addresses; a
 * paymaster has no default, so an EntryPoint is served only once its paymaster is deployed and
 * named.
 */
function readEntryPoints(
  p: string,
  read: <T>(name: string, parse: (raw: string) => T, fallback: T) => T,
  problems: string[],
): EntryPointConfig[] {
  const entryPoints: EntryPointConfig[] = [
    {
      version: "0.7",
      entryPoint: read(`${p}ENTRYPOINT_ADDRESS`, address, ENTRYPOINT_V07 as Address),
      paymaster: read(`${p}PAYMASTER_ADDRESS`, address, null),
    },
    {
      version: "0.8",
      entryPoint: read(`${p}ENTRYPOINT_V08_ADDRESS`, address, ENTRYPOINT_V08 as Address),
      paymaster: read(`${p}PAYMASTER_V08_ADDRESS`, address, null),
    },
  ];
  const [v07, v08] = entryPoints as [EntryPointConfig, EntryPointConfig];
  // One address cannot be both EntryPoints, and a paymaster is bound to one EntryPoint for life
  // (its constructor takes it): the same address twice is a typo, caught here rather than on chain.
  if (sameAddress(v07.entryPoint, v08.entryPoint)) {
    problems.push(`${p}ENTRYPOINT_V08_ADDRESS: must differ from ${p}ENTRYPOINT_ADDRESS`);
  }
  if (v07.paymaster && v08.paymaster && sameAddress(v07.paymaster, v08.paymaster)) {
    problems.push(`${p}PAYMASTER_V08_ADDRESS: must differ from ${p}PAYMASTER_ADDRESS`);
  }
  return entryPoints;
}

/** The chain's served EntryPoints (a paymaster is configured), v0.7 first. */
export function liveEntryPoints(chain: Pick<ChainConfig, "entryPoints">): LiveEntryPoint[] {
  return chain.entryPoints.filter((e): e is LiveEntryPoint => e.paymaster !== null);
}

/** The live EntryPoint at `entryPoint` on the chain (any letter case), or null when it is not served. */
export function liveEntryPointAt(
  chain: Pick<ChainConfig, "entryPoints">,
  entryPoint: string,
): LiveEntryPoint | null {
  return liveEntryPoints(chain).find((e) => sameAddress(e.entryPoint, entryPoint)) ?? null;
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

function readOidc(env: Env, production: boolean, problems: string[]): OidcConfig | null {
  const issuer = env.OIDC_ISSUER;
  const audience = env.OIDC_AUDIENCE;
  const jwksUrl = env.OIDC_JWKS_URL;
  const given = [issuer, audience, jwksUrl].filter((v) => v !== undefined && v !== "");
  if (given.length === 0) return null;
  if (given.length !== 3) {
    problems.push("OIDC_ISSUER, OIDC_AUDIENCE and OIDC_JWKS_URL must be set together");
    return null;
  }
  // The JWKS is where token signing keys come from, and the issuer is where the dashboard
  // discovers the provider: over plain http anyone on the path could hand the service keys of
  // their own and sign in as any developer.
  for (const [name, value] of [
    ["OIDC_ISSUER", issuer!],
    ["OIDC_JWKS_URL", jwksUrl!],
  ] as const) {
    try {
      identityProviderUrl(value, production);
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
    }
  }
  return { issuer: issuer!, audience: audience!, jwksUrl: jwksUrl! };
}

/**
 * An https URL; plain http only for a loopback host (an identity provider on this machine, in
 * development and tests), never in production.
 */
function identityProviderUrl(v: string, production: boolean): string {
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new Error("must be a URL");
  }
  if (parsed.protocol === "https:") return v;
  if (parsed.protocol !== "http:") throw new Error("must use https:");
  if (production)
    throw new Error("must use https: in production (http would let anyone on the path supply signing keys)");
  if (!isLoopbackHost(parsed.hostname)) {
    throw new Error("must use https: (http is accepted only for a loopback host, outside production)");
  }
  return v;
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1") return true;
  return isIP(host) === 4 && host.startsWith("127.");
}

/** Comma-separated keys, each as SECRETS_ENCRYPTION_KEY takes it; named by position, never quoted. */
function keyList(v: string): Buffer[] {
  const entries = v
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  return entries.map((entry, i) => {
    try {
      return decodeKey(entry);
    } catch (err) {
      throw new Error(`entry ${i + 1} ${(err as Error).message}`);
    }
  });
}

function emailList(v: string): string[] {
  const emails = v
    .split(",")
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== "");
  for (const e of emails)
    if (!/^[^\s@]+@[^\s@]+$/.test(e)) throw new Error("must be a comma-separated list of emails");
  return emails;
}

/** Printable ASCII up to `max` characters (spaces only where `spaces`): safe to send to a browser. */
function printable(v: string, max: number, spaces = false): string {
  const pattern = spaces ? /^[ -~]+$/ : /^[!-~]+$/;
  if (!pattern.test(v) || v.length > max) {
    throw new Error(`must be at most ${max} printable ASCII characters${spaces ? "" : " without spaces"}`);
  }
  return v;
}

function oneOf(v: string, allowed: string[]): string {
  if (!allowed.includes(v)) throw new Error(`must be one of ${allowed.join(", ")}`);
  return v;
}

function intIn(v: string, min: number, max: number): number {
  if (!/^\d+$/.test(v)) throw new Error("must be a non-negative integer");
  const n = Number(v);
  if (n < min || n > max) throw new Error(`must be between ${min} and ${max}`);
  return n;
}

function positiveBigint(v: string): bigint {
  if (!/^[1-9]\d{0,30}$/.test(v)) throw new Error("must be a positive integer (wei)");
  return BigInt(v);
}

function nonNegativeBigint(v: string): bigint {
  if (!/^(0|[1-9]\d{0,30})$/.test(v)) throw new Error("must be a non-negative integer (wei)");
  return BigInt(v);
}

function url(protocols: string[]) {
  return (v: string): string => {
    let parsed: URL;
    try {
      parsed = new URL(v);
    } catch {
      throw new Error("must be a URL");
    }
    if (!protocols.includes(parsed.protocol)) throw new Error(`must use ${protocols.join(" or ")}`);
    return v;
  };
}

/** Comma-separated URLs, each checked like url(); at most `max` of them. */
function urlList(protocols: string[], max: number) {
  const one = url(protocols);
  return (v: string): string[] => {
    const parts = v.split(",").map((part) => part.trim());
    if (parts.some((part) => part === "")) throw new Error("must be URLs separated by commas, none empty");
    if (parts.length > max) throw new Error(`at most ${max} URLs`);
    return parts.map((part, i) => {
      try {
        return one(part);
      } catch (err) {
        // Which one, by position: the value itself may carry a password.
        throw new Error(`URL ${i + 1}: ${(err as Error).message}`);
      }
    });
  };
}

function address(v: string): Address {
  if (!isAddress(v, { strict: false })) throw new Error("must be a 20-byte hex address");
  return v as Address;
}

function privateKey(v: string): Hex {
  const hex = (v.startsWith("0x") ? v : `0x${v}`) as Hex;
  // The value itself is never echoed: a malformed secret must not end up in a boot log.
  if (!isHex(hex) || hex.length !== 66) throw new Error("must be 32 bytes of hex");
  // A key is a scalar in [1, n-1]: zero (a placeholder left in) or anything from n up signs nothing.
  const scalar = BigInt(hex);
  if (scalar === 0n || scalar >= SECP256K1_ORDER) throw new Error("is not a valid secp256k1 private key");
  return hex;
}

const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

function boolean(v: string): boolean {
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0") return false;
  throw new Error("must be true or false");
}

/** A count of worker processes, or `auto`: one per core the process may use. */
function workerCount(v: string): number {
  if (v === "auto") return availableParallelism();
  return intIn(v, 1, 256);
}

function bearerToken(v: string): string {
  // Never echoed: a bad value is described, not quoted.
  if (!/^[!-~]{16,512}$/.test(v)) throw new Error("must be 16 to 512 printable characters without spaces");
  return v;
}

const PROXY_NAMES = ["loopback", "linklocal", "uniquelocal"];

/** A hop count (0 = off), or a comma-separated list of addresses, CIDR ranges and proxy-addr names. */
function trustProxy(v: string): false | number | string[] {
  if (/^\d+$/.test(v)) {
    const hops = intIn(v, 0, 100);
    return hops === 0 ? false : hops;
  }
  if (v === "false" || v === "off") return false;
  const entries = v
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  for (const entry of entries) {
    if (PROXY_NAMES.includes(entry)) continue;
    const [ip, prefix, extra] = entry.split("/");
    const family = isIP(ip ?? "");
    const bits = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (family === 0 || !prefixOk || extra !== undefined) {
      throw new Error(
        `must be a hop count or a list of IP addresses and CIDR ranges (entry ${entries.indexOf(entry) + 1} is neither)`,
      );
    }
  }
  if (entries.length === 0) throw new Error("must be a hop count or a list of IP addresses and CIDR ranges");
  return entries;
}

function xpub(v: string): string {
  if (!/^[xt]pub[1-9A-HJ-NP-Za-km-z]{100,112}$/.test(v)) throw new Error("must be an extended public key");
  return v;
}
