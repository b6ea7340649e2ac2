import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { SenderCodeResolver } from "./accounts/code/resolve.ts";
import type { ApiKeyResolver } from "./api-keys/resolver.ts";
import type { FeeOracle } from "./chains/fee-oracle.ts";
import type { Config } from "./config.ts";
import type { Db } from "./db/db.ts";
import type { Reads } from "./db/replicas.ts";
import type { DepositDeriver } from "./funding/derivation.ts";
import type { ReadinessProbe } from "./health/readiness.ts";
import type { TokenVerifier } from "./identity/tokens.ts";
import type { ReservationBatcher } from "./ledger/batcher.ts";
import type { Metrics } from "./metrics/metrics.ts";
import type { AuthFailureLimiter } from "./rate-limits/failed-auth.ts";
import type { RateLimiter } from "./rate-limits/limiter.ts";
import type { RefusalRecorder } from "./refusals/recorder.ts";
import type { Keyring } from "./secrets/envelope.ts";
import type { Signer } from "./sponsor/signer.ts";
import type { ApprovalGate } from "./webhooks/approval.ts";

/** Everything the routes need, wired once in services.ts and passed explicitly. */
export interface Services {
  version: string;
  config: Config;
  db: Db;
  /**
   * Where lag-tolerant reads go (analytics, events, deposit history, funds parity): the read
   * replicas of DATABASE_READ_URL while they are close enough, else `db` (db/replicas.ts). Who
   * may read is still checked on `db`.
   */
  reads: Reads;
  tokens: TokenVerifier;
  deposits: DepositDeriver;
  apiKeys: ApiKeyResolver;
  rateLimiter: RateLimiter;
  /** Per-developer request budgets (DEVELOPER_RATE_LIMIT), counted like the per-key ones. */
  developerRateLimiter: RateLimiter;
  /** Failed authentications per client address (FAILED_AUTH_LIMIT). */
  authFailures: AuthFailureLimiter;
  signer: Signer;
  /** The keys that seal stored secrets (webhook and approval signing secrets) at rest. */
  keyring: Keyring;
  /** Reserves gas tank funds for authorizations, batching concurrent ones per project. */
  reservations: ReservationBatcher;
  /** Each chain's current base fee and priority fee, read synchronously from a cache. */
  feeOracle: FeeOracle;
  /** What code each sender runs, matched against the registry of known accounts (cached). */
  senderCode: SenderCodeResolver;
  readiness: ReadinessProbe[];
  /** Prometheus metrics of this instance (GET /metrics). */
  metrics: Metrics;
  /** Projects' approval webhooks, asked before a sponsorship is signed (settings cached). */
  approvals: ApprovalGate;
  /** Refused sponsorship requests, buffered and written in batches (refusals/recorder.ts). */
  refusals: RefusalRecorder;
  /** Milliseconds since the epoch; tests may move it. */
  now: () => number;
}

export type RoutePlugin = FastifyPluginAsyncTypebox<{ services: Services }>;
