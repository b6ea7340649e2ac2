import type { Config } from "../config.ts";

/**
 * What the process refuses to run with, decided from the configuration alone (pure; server.ts
 * reports and exits). Two kinds of rules:
 *
 * - Production (NODE_ENV=production) refuses the embedded defaults that are fine on a laptop and
 *   wrong with real money: a signer key generated into DATA_DIR, a deposit seed generated into
 *   DATA_DIR (it can spend every deposit, and has no business on the API host), the embedded
 *   store (one process, one disk, no replicas), and a secrets key generated into DATA_DIR (the
 *   webhook secrets would be sealed under a key kept beside the database, or lost with one
 *   instance's disk). ALLOW_INSECURE_DEFAULTS=true relaxes exactly these four, each with a
 *   warning at every start. The local token issuer stays refused.
 * - Cluster mode (WORKERS > 1) needs what makes workers as exact as separate instances: a shared
 *   database (PGlite lives in one process's memory) and shared rate limits (in-memory counters
 *   would give every worker the whole budget). Nothing relaxes these.
 */
export interface ProcessPolicy {
  /** Reasons to refuse to start, one line each. */
  refusals: string[];
  /** Insecure defaults allowed by ALLOW_INSECURE_DEFAULTS, one warning each. */
  relaxed: { setting: string; warning: string }[];
}

type PolicyConfig = Pick<
  Config,
  | "env"
  | "signerPrivateKey"
  | "depositXpub"
  | "databaseUrl"
  | "secretsEncryptionKey"
  | "redis"
  | "oidc"
  | "allowInsecureDefaults"
  | "workers"
>;

export function processPolicy(config: PolicyConfig): ProcessPolicy {
  const refusals: string[] = [];
  const relaxed: ProcessPolicy["relaxed"] = [];

  if (config.env === "production") {
    if (!config.oidc) {
      refusals.push(
        "the local token issuer is refused in production: set OIDC_ISSUER, OIDC_AUDIENCE, OIDC_JWKS_URL",
      );
    }
    const insecure = [
      {
        setting: "SIGNER_PRIVATE_KEY",
        missing: config.signerPrivateKey === null,
        refusal:
          "SIGNER_PRIVATE_KEY is not set: in production the paymaster's signer key comes from configuration, it is not generated into DATA_DIR",
        warning: "SIGNER_PRIVATE_KEY is not set: using a signer key generated into DATA_DIR/signer.key",
      },
      {
        setting: "DEPOSIT_XPUB",
        missing: config.depositXpub === null,
        refusal:
          "DEPOSIT_XPUB is not set: in production deposit addresses derive from an extended public key; the service does not generate a seed (which could spend every deposit) on the API host",
        warning: "DEPOSIT_XPUB is not set: deriving deposit addresses from a seed generated into DATA_DIR",
      },
      {
        setting: "DATABASE_URL",
        missing: config.databaseUrl === null,
        refusal:
          "DATABASE_URL is not set: in production the store is PostgreSQL, not the embedded PGlite (one process, one disk)",
        warning: "DATABASE_URL is not set: using the embedded PGlite store in DATA_DIR",
      },
      {
        setting: "SECRETS_ENCRYPTION_KEY",
        missing: config.secretsEncryptionKey === null,
        refusal:
          "SECRETS_ENCRYPTION_KEY is not set: in production the key that encrypts webhook and approval secrets at rest comes from configuration (32 bytes, base64 or hex), it is not generated into DATA_DIR",
        warning:
          "SECRETS_ENCRYPTION_KEY is not set: encrypting webhook secrets under a key generated into DATA_DIR/secrets.key",
      },
    ];
    for (const item of insecure.filter((i) => i.missing)) {
      if (config.allowInsecureDefaults) relaxed.push({ setting: item.setting, warning: item.warning });
      else refusals.push(`${item.refusal} (or set ALLOW_INSECURE_DEFAULTS=true)`);
    }
  }

  if (config.workers > 1) {
    if (config.databaseUrl === null) {
      refusals.push(
        `WORKERS=${config.workers} needs DATABASE_URL: the embedded PGlite store lives in one process and cannot be shared by workers (use WORKERS=1)`,
      );
    }
    if (config.redis === null) {
      refusals.push(
        `WORKERS=${config.workers} needs REDIS_URL: in-memory rate limits would be counted per worker, each allowing the whole budget (a Redis Cluster, REDIS_CLUSTER_NODES, or Sentinel, REDIS_SENTINELS, serves as well)`,
      );
    }
  }
  return { refusals, relaxed };
}
