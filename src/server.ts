import { buildApp } from "./app.ts";
import { ConfigError, loadConfig } from "./config.ts";
import { openDb } from "./db/index.ts";
import { migrate } from "./db/migrate.ts";
import { wireServices } from "./services.ts";

/** Reads config, opens storage, migrates, listens, and shuts down gracefully on SIGINT/SIGTERM. */
async function main() {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  if (config.env === "production" && !config.oidc) {
    console.error("invalid configuration:\n  - the local token issuer is refused in production: set OIDC_*");
    process.exit(2);
  }
  const db = await openDb(config);
  await migrate(db);
  const wired = await wireServices(config, db, { chainWatchers: true });
  const app = await buildApp({
    services: wired.services,
    logger: {
      level: config.logLevel,
      redact: { paths: ["req.headers.authorization", "headers.authorization"], censor: "[redacted]" },
    },
  });
  // Fees are read once before listening, so that a fresh instance does not answer its first
  // authorizations with 503 while the first reading is on its way. The read is bounded by the
  // oracle's RPC timeout, and a failure only delays fresh fees: the loop keeps trying.
  const { feeOracle } = wired.services;
  feeOracle.start(app.log.child({ component: "fee-oracle" }));
  await feeOracle.refresh();
  await app.listen({ port: config.port, host: config.host });
  app.log.info(
    {
      store: db.kind,
      rateLimits: wired.services.rateLimiter.shared ? "redis" : "memory",
      signer: wired.services.signer.address,
    },
    "gas sponsorship service ready",
  );
  // After listen, so the first ticks do not delay the port opening; wired.close() stops them.
  wired.watchers?.start(app.log.child({ component: "chain-watcher" }));

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, "shutting down");
    const force = setTimeout(() => process.exit(1), 10_000);
    force.unref();
    await app.close();
    await wired.close();
    await db.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}

await main();
