import { parseArgs } from "node:util";
import { loadConfig } from "../src/config.ts";
import { localIssuer } from "../src/identity/tokens.ts";

/** Prints a one-hour developer token from the local issuer (same DATA_DIR as the service). */
const { values } = parseArgs({ options: { email: { type: "string" }, ttl: { type: "string" } } });
if (!values.email) {
  console.error("usage: npm run token -- --email <email> [--ttl <seconds>]");
  process.exit(2);
}
const config = loadConfig();
if (config.oidc) {
  console.error("OIDC is configured: get tokens from your identity provider instead");
  process.exit(2);
}
const issuer = await localIssuer(config.dataDir);
console.log(await issuer.issue(values.email, values.ttl ? Number(values.ttl) : 3600));
