/**
 * A real ERC-4337 bundler for the chain tests: Pimlico's Alto (npm `@pimlico/alto`), run as
 * its own process against a local anvil chain on a free port. Tests talk to it with viem's or
 * permissionless's bundler clients, exactly as a wallet talks to a hosted bundler.
 *
 * Alto runs in unsafe mode (no ERC-7562 tracing; see the safe-mode flag below). Everything
 * else is the production code path: simulation through the EntryPoint, gas estimation, the
 * mempool, and bundles signed by an executor key and mined by anvil. Alto has no host flag
 * and listens on every interface; the URL handed out is the loopback one.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { stripVTControlCharacters } from "node:util";
import type { Address, Hex } from "viem";
import { devWalletKey, freePort } from "./chain/anvil.ts";

/**
 * The anvil accounts a bundler may use. Index 0 deploys the stack and 1 plays the bundler in
 * the handleOps tests, so Alto's executor takes 2 and its utility account (which deploys
 * Alto's simulation contracts at startup) takes 3.
 */
/**
 * A paymaster validation revert (AA33) in Alto's log, as a word: the bare letters also occur inside
 * the hex of a checksummed address (a sender 0x…336AA33f4… failed a CI run that had no revert).
 */
export const AA33_REVERT = /\bAA33\b/;

export const BUNDLER_EXECUTOR_ACCOUNT_INDEX = 2;
export const BUNDLER_UTILITY_ACCOUNT_INDEX = 3;

const STARTUP_TIMEOUT_MS = 30_000;
const STDERR_TAIL_CHARS = 4_000;
const LOG_TAIL_CHARS = 4_000;

export interface StartBundlerOptions {
  /** The chain's JSON-RPC endpoint (DevChain.rpcUrl). */
  rpcUrl: string;
  /** EntryPoints to serve; each must already have code on the chain. */
  entryPoints: readonly Address[];
  /** Keys that sign and pay for bundle transactions. Default: anvil account 2. */
  executorPrivateKeys?: readonly Hex[];
  /**
   * Key that deploys Alto's simulation contracts (CREATE2 via the deterministic deployer)
   * when it starts, and receives the bundles' beneficiary fees. Default: anvil account 3.
   */
  utilityPrivateKey?: Hex;
  /** "auto" bundles on its own every few hundred ms; "manual" waits for debug_bundler_sendBundleNow. */
  bundleMode?: "auto" | "manual";
  logLevel?: "trace" | "debug" | "info" | "warn" | "error";
  /**
   * More Alto CLI flags, by name without the leading dashes ({"gas-price-expiry": "60"});
   * a flag named here replaces the harness's value for it.
   */
  flags?: Readonly<Record<string, string>>;
}

export interface Bundler {
  /**
   * Alto's JSON-RPC endpoint, on its "v2" route: the stricter API Pimlico's hosted bundlers
   * serve, which checks preVerificationGas and the minimum fees as well (the bare "/rpc"
   * route is "v1", which skips both).
   */
  url: string;
  /** The tail of what Alto printed, its stderr (fatal errors) first, then its log: for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

export async function startBundler(options: StartBundlerOptions): Promise<Bundler> {
  if (options.entryPoints.length === 0) throw new Error("startBundler: no entry points");
  const port = await freePort();
  const executorKeys = options.executorPrivateKeys ?? [devWalletKey(BUNDLER_EXECUTOR_ACCOUNT_INDEX)];
  const utilityKey = options.utilityPrivateKey ?? devWalletKey(BUNDLER_UTILITY_ACCOUNT_INDEX);
  const cli = altoCli();
  const flags: Record<string, string> = {
    "rpc-url": options.rpcUrl,
    port: String(port),
    entrypoints: options.entryPoints.join(","),
    "executor-private-keys": executorKeys.join(","),
    "utility-private-key": utilityKey,
    // Safe mode's ERC-7562 validation traces with a JavaScript tracer. anvil runs those, but
    // Alto 0.0.20 then cannot read the result for an EntryPoint v0.7 operation: every
    // eth_sendUserOperation fails with "Encoded error signature 0x99410554 not found on ABI"
    // (the EntryPoint's DelegateAndRevert). Alto's own end-to-end suite runs unsafe as well.
    "safe-mode": "false",
    // A fresh chain has none of Alto's simulation contracts: the utility key deploys them.
    "deploy-simulations-contract": "true",
    // Alto polls the chain every block-time / 4 ms; anvil mines each transaction at once.
    "block-time": "200",
    "bundle-mode": options.bundleMode ?? "auto",
    "min-bundle-interval": "50",
    "max-bundle-interval": "200",
    // debug_bundler_* (dumpMempool, sendBundleNow, clearState) for tests that need them.
    "enable-debug-endpoints": "true",
    // Executors hold anvil's 10,000 ETH: no refills, no 15-second balance polling.
    "refilling-wallets": "false",
    "utility-wallet-monitor": "false",
    "log-level": options.logLevel ?? "info",
    // At "info" Alto logs every request it makes to the node, polling included: that would
    // push everything else out of the log tail.
    "public-client-log-level": "warn",
    // Given twice, a flag becomes a list Alto refuses: overrides replace the defaults instead.
    ...options.flags,
  };
  const args = [cli, ...Object.entries(flags).flatMap(([name, value]) => [`--${name}`, value])];

  const child = spawn(process.execPath, args, {
    // Alto reads a .env file from its working directory and ALTO_* variables from the
    // environment; neither may leak in from the developer's shell or the project root.
    cwd: dirname(cli),
    env: altoEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  // Both pipes must be drained, or Alto blocks once one of them fills. Its log goes to stdout;
  // what stops it (a bad flag, a missing EntryPoint) goes to stderr.
  let log = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    // Alto's pretty log always colours its lines; error messages want plain text.
    log = (log + stripVTControlCharacters(chunk.toString())).slice(-LOG_TAIL_CHARS);
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL_CHARS);
  });
  const output = () => `--- Alto stderr ---\n${stderr}\n--- Alto log (tail) ---\n${log}`;
  // A test runner that dies mid-file must not leave Alto behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  const url = `http://127.0.0.1:${port}/v2/rpc`;
  try {
    await waitUntilServing(url, options.entryPoints, child, output);
  } catch (err) {
    child.kill("SIGKILL");
    process.removeListener("exit", killOnExit);
    throw err;
  }
  return {
    url,
    output,
    stop: () => stopProcess(child, killOnExit),
  };
}

/** The path of Alto's CLI script, from the `bin` of the installed package. */
function altoCli(): string {
  const require = createRequire(import.meta.url);
  // The package exports only its entry point, so find its root from there.
  let dir = dirname(require.resolve("@pimlico/alto"));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (pkg.name === "@pimlico/alto") {
        const bin = typeof pkg.bin === "string" ? pkg.bin : pkg.bin?.alto;
        if (typeof bin !== "string") throw new Error("@pimlico/alto declares no alto binary");
        return join(dir, bin);
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error("@pimlico/alto: package root not found");
    dir = parent;
  }
}

function altoEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith("ALTO_") || name === "DOTENV_CONFIG_PATH" || name === "SENTRY_DSN") continue;
    env[name] = value;
  }
  return env;
}

async function waitUntilServing(
  url: string,
  entryPoints: readonly Address[],
  child: ChildProcess,
  output: () => string,
): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_supportedEntryPoints", params: [] });
  const wanted = entryPoints.map((a) => a.toLowerCase());
  let lastAnswer = "";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`Alto exited during startup (${child.exitCode ?? child.signalCode}):\n${output()}`);
    }
    try {
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
      const reply = (await res.json()) as { result?: unknown };
      const served = Array.isArray(reply.result) ? reply.result.map((a) => String(a).toLowerCase()) : [];
      if (wanted.every((a) => served.includes(a))) return;
      lastAnswer = JSON.stringify(reply);
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `Alto did not serve ${entryPoints.join(", ")} on ${url} within ${STARTUP_TIMEOUT_MS} ms` +
      `${lastAnswer ? ` (last answer: ${lastAnswer})` : ""}:\n${output()}`,
  );
}

function stopProcess(child: ChildProcess, killOnExit: () => void): Promise<void> {
  process.removeListener("exit", killOnExit);
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    // Alto shuts down on SIGTERM (stops its server, drops its mempool); give it a moment.
    const force = setTimeout(() => child.kill("SIGKILL"), 3_000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
