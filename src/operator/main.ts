/**
 * The operator's CLI for the paymaster contract: deploy, fund, stake, rotate the signer, check
 * the deployment, plan and run sweeps of the funding addresses. See README "Operating the
 * paymaster" and `npm run paymaster -- help`. Compiled into dist/ with the server, so it runs on
 * plain Node (`node dist/operator/main.js`), in a production image as in development.
 */
import { runCli } from "./cli.ts";

process.exitCode = await runCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
});
