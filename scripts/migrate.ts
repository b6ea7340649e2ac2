import { ConfigError, loadConfig } from "../src/config.ts";
import { migrate } from "../src/db/migrate.ts";
import { processLogger } from "../src/process/log.ts";
import { openStore, StartupFailure } from "../src/process/startup.ts";

// The same store as the server, opened the same way: the DATA_DIR lock (a running embedded server
// is refused, not corrupted) and, for PostgreSQL, the retries of DB_CONNECT_TIMEOUT_SEC.
try {
  const config = loadConfig();
  const store = await openStore(config, processLogger(config.logLevel));
  try {
    const { migrations, functions, newer } = await migrate(store.db);
    if (newer.length > 0) {
      console.log(
        `the database has migrations this release does not know (${newer.join(", ")}): its functions are left as the newer release applied them`,
      );
    } else if (migrations.length === 0 && functions.length === 0) console.log("database is up to date");
    if (migrations.length > 0) console.log(`migrations applied: ${migrations.join(", ")}`);
    if (functions.length > 0) console.log(`functions applied: ${functions.join(", ")}`);
  } finally {
    await store.close();
  }
} catch (err) {
  if (!(err instanceof ConfigError || err instanceof StartupFailure)) throw err;
  console.error(err.message);
  process.exit(err instanceof ConfigError ? 2 : err.exitCode);
}
