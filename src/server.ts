import cluster from "node:cluster";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import type { Services } from "./context.ts";
import type { Db } from "./db/db.ts";
import { migrate } from "./db/migrate.ts";
import { runPrimary, workerIndex } from "./process/cluster.ts";
import { exitAfterLog, processLogger } from "./process/log.ts";
import { processPolicy } from "./process/policy.ts";
import { httpDrain, installShutdown } from "./process/shutdown.ts";
import {
  EXIT_CONFIG,
  EXIT_FAILURE,
  firstLine,
  listenFailure,
  openStore,
  StartupAborted,
  StartupFailure,
} from "./process/startup.ts";
import { SEALED_COLUMNS } from "./secrets/registry.ts";
import { resealSecrets } from "./secrets/reseal.ts";

/** Replaced by the configured logger once the configuration is read. */
let log: Logger = processLogger();

/**
 * Aborted by SIGTERM/SIGINT before the process is up: start-up stops waiting for the database.
 * (Once serving, the shutdown steps take over; a signal during the other start-up steps is held
 * until they are done, then acted on.)
 */
const startup = new AbortController();
const abortStartup = (signal: NodeJS.Signals) => startup.abort(signal);
process.once("SIGTERM", abortStartup);
process.once("SIGINT", abortStartup);

/**
 * The process: reads config, refuses what production must not run with, then either serves
 * (opens the store, migrates, wires, listens, starts the watchers) or, with WORKERS > 1, runs the
 * cluster primary that forks the workers that serve. Shuts down gracefully on SIGTERM/SIGINT
 * within SHUTDOWN_TIMEOUT_MS. Every start-up failure is one JSON log line and a non-zero exit:
 * 2 for the configuration, 1 for the environment (database, port, data directory).
 *
 * Run it compiled: `npm start` (builds dist/ when src/ changed, then `exec node dist/server.js`),
 * or `node dist/server.js` as a container's command.
 */
async function main() {
  const index = workerIndex();
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      const problems = err.message.split("\n  - ").slice(1);
      throw new StartupFailure(`invalid configuration: ${problems.join("; ")}`, EXIT_CONFIG, { problems });
    }
    throw err;
  }
  log = processLogger(config.logLevel, index === null ? {} : { worker: index });

  const policy = processPolicy(config);
  if (policy.refusals.length > 0) {
    throw new StartupFailure(`refusing to start: ${policy.refusals.join("; ")}`, EXIT_CONFIG, {
      refusals: policy.refusals,
    });
  }
  // Said once per start: by the primary in cluster mode, not by every worker.
  if (index === null) {
    for (const r of policy.relaxed) log.warn({ setting: r.setting }, `ALLOW_INSECURE_DEFAULTS: ${r.warning}`);
  }

  if (config.workers > 1 && cluster.isPrimary) {
    await preflight(config, log);
    if (startup.signal.aborted) throw new StartupAborted(String(startup.signal.reason));
    const primaryLog = log.child({ role: "primary" });
    runPrimary({
      workers: config.workers,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
      log: primaryLog,
      exec: fileURLToPath(import.meta.url),
      exit: (code) => exitAfterLog(primaryLog, code),
    });
    return;
  }
  await serve(config, log, index);
}

/**
 * One serving process: a single process (WORKERS=1), or cluster worker `index`. Only the single
 * process or worker 1 starts the chain watchers; across instances, one of them leads each chain
 * (chains/leadership.ts).
 */
async function serve(config: Config, log: Logger, index: number | null) {
  const shutdown = installShutdown({
    log,
    timeoutMs: config.shutdownTimeoutMs,
    exit: (code) => exitAfterLog(log, code),
  });
  // The service's modules load once the settings have passed: a start-up that fails on them never
  // loads them (about 0.7 s of CPU, most of what such a failure cost). Before the store is opened,
  // not while: their loading would take the event loop from the connection's retry schedule
  // (DB_CONNECT_TIMEOUT_SEC), and a loaded machine saw no retry at all within 2 s.
  const [{ wireServices }, { buildApp }] = await Promise.all([import("./services.ts"), import("./app.ts")]);
  // Embedded, PGlite gets a thread of its own: its statements no longer take the event loop.
  const store = await openStore(config, log, startup.signal, { embeddedThread: true });
  const runsWatchers = index === null || index === 1;
  await migrateStore(store.db, log);
  const wired = await wireServices(config, store.db, { chainWatchers: true });
  await sealPlaintextSecrets(wired.services, log);
  const app = await buildApp({ services: wired.services, loggerInstance: log });
  const drain = httpDrain(app);
  shutdown.add(drain.step);
  shutdown.add({ name: "services", run: () => wired.close() });
  shutdown.add({ name: "store", run: () => store.close() });

  // Fees are read once before listening, so that a fresh instance does not answer its first
  // authorizations with 503 while the first reading is on its way. The read is bounded by the
  // oracle's RPC timeout, and a failure only delays fresh fees: the loop keeps trying.
  const { feeOracle } = wired.services;
  feeOracle.start(log.child({ component: "fee-oracle" }));
  await feeOracle.refresh();
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    throw listenFailure(err, config.host, config.port) ?? err;
  }
  const address = app.server.address();
  app.log.info(
    {
      port: typeof address === "object" && address ? address.port : config.port,
      store: store.db.kind,
      rateLimits: wired.services.rateLimiter.shared ? "redis" : "memory",
      // Which Redis: one server, a cluster or through Sentinel (never its URL: it may carry a password).
      ...(config.redis ? { redis: config.redis.mode } : {}),
      signer: wired.services.signer.address,
      secretsKey: wired.services.keyring.current.id,
      watchers: runsWatchers,
      version: wired.services.version,
    },
    "gas sponsorship service ready",
  );
  // After listen, so the first ticks do not delay the port opening; wired.close() stops them.
  if (runsWatchers) wired.watchers?.start(log.child({ component: "chain-watcher" }));
  // Every instance delivers webhooks: claims never overlap (webhooks/deliveries.ts).
  wired.webhooks.start(log.child({ component: "webhooks" }));
  // Every instance runs the upkeep too: its batches skip rows another instance holds.
  wired.maintenance.start(log.child({ component: "maintenance" }));
  shutdown.ready();
}

/**
 * Seals the secrets still stored in plain text (rows written before they were sealed), before
 * anything is served: migration 018 cannot, having no key. Re-sealing what an older key sealed
 * is the operator's step (`npm run secrets -- rotate`), not start-up's: during a rolling change
 * of key, an instance still on the old key could not open what a new one re-sealed.
 */
async function sealPlaintextSecrets(services: Pick<Services, "db" | "keyring">, log: Logger) {
  try {
    const { resealed } = await resealSecrets(services.db, services.keyring, SEALED_COLUMNS, "plaintext");
    if (resealed > 0) {
      log.info(
        { secrets: resealed, secretsKey: services.keyring.current.id },
        "secrets stored in plain text were encrypted",
      );
    }
  } catch (err) {
    throw new StartupFailure(`encrypting the secrets stored in plain text failed: ${firstLine(err)}`);
  }
}

/**
 * What the cluster primary checks before forking, so that a failure is reported once rather than
 * by every worker: the configuration's store is reachable and migrated, and the port is free.
 */
async function preflight(config: Config, log: Logger) {
  const store = await openStore(config, log, startup.signal);
  try {
    await migrateStore(store.db, log);
  } finally {
    await store.close();
  }
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err) => reject(listenFailure(err, config.host, config.port) ?? err));
    probe.listen({ port: config.port, host: config.host, exclusive: true }, () =>
      probe.close(() => resolve()),
    );
  });
}

/**
 * Brings the store's schema up to date; a failure is a start-up failure of its own. A store a newer
 * release migrated is served as it is, with a warning (an upgrade with both releases running).
 */
async function migrateStore(db: Db, log: Logger) {
  let newer: string[];
  try {
    ({ newer } = await migrate(db));
  } catch (err) {
    throw new StartupFailure(`migrations failed: ${firstLine(err)}`);
  }
  if (newer.length > 0) {
    log.warn(
      { newerMigrations: newer },
      "the database was migrated by a newer release: its functions are left as that release applied them",
    );
  }
}

/**
 * Logs a start-up failure as one line (no stack) and exits with its code once the line is out
 * (exitAfterLog). The last thing the process does: main() throws its failures up to here.
 */
function fail(logger: Logger, err: unknown): void {
  const failure =
    err instanceof StartupFailure
      ? err
      : new StartupFailure(`start-up failed: ${firstLine(err)}`, EXIT_FAILURE, {
          error: err instanceof Error ? err.name : typeof err,
        });
  logger.fatal(failure.details, failure.message);
  exitAfterLog(logger, failure.exitCode);
}

try {
  await main();
} catch (err) {
  if (err instanceof StartupAborted) {
    log.info({ signal: err.signal }, err.message);
    exitAfterLog(log, 0);
  } else {
    fail(log, err);
  }
}
