/**
 * Entry point of `npm run secrets -- new-key | status | rotate`, and of
 * `node dist/secrets/main.js rotate` in a built image (no tsx there). See src/secrets/cli.ts.
 */
import { runSecretsCli } from "./cli.ts";

process.exitCode = await runSecretsCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
});
