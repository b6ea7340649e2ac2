/**
 * A throwaway local chain: spawns anvil (on Linux x64 the binary of `@foundry-rs/anvil-linux-amd64`,
 * which `npm ci` installs; elsewhere ANVIL_BIN or the `anvil` on PATH, see the README) on a free
 * port and hands back viem clients bound to it. Used by the chain tests and `npm run demo`;
 * the service itself never starts a chain.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { pbkdf2Sync } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";
import {
  type Chain,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  type LocalAccount,
  type PublicClient,
  type TestClient,
  type Transport,
  toHex,
  type WalletClient,
} from "viem";
import { type HDAccount, HDKey, hdKeyToAccount } from "viem/accounts";
import { freePort } from "../ports.ts";

export { freePort };

/** The chain id the service knows as Sonic testnet; tests run anvil under the same id. */
export const DEVNET_CHAIN_ID = 14601;

/** anvil's well-known development mnemonic: its accounts are funded with 10,000 ETH each. */
const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
const FUNDED_ACCOUNT_COUNT = 4;
const STARTUP_TIMEOUT_MS = 15_000;

/**
 * The private key of anvil's funded account `index` (wallet 0 deploys and owns the stack): for a
 * child process, such as the operator CLI, that reads its key from the environment.
 */
export function devWalletKey(index = 0): Hex {
  return toHex(devAccount(index).getHdKey().privateKey!);
}

/**
 * Funded anvil account `index`. viem's mnemonicToAccount stretches the mnemonic into its seed
 * (BIP-39: PBKDF2-HMAC-SHA512, 2,048 rounds) in JavaScript on every call, about 100 ms of CPU
 * each; here node's native PBKDF2 does it once per process and each account is derived from that root.
 */
export function devAccount(index: number): HDAccount {
  devRoot ??= HDKey.fromMasterSeed(pbkdf2Sync(ANVIL_MNEMONIC, "mnemonic", 2048, 64, "sha512"));
  return hdKeyToAccount(devRoot, { addressIndex: index });
}
let devRoot: HDKey | undefined;

export type DevWalletClient = WalletClient<Transport, Chain, LocalAccount>;

export interface DevChain {
  rpcUrl: string;
  chainId: number;
  chain: Chain;
  publicClient: PublicClient<Transport, Chain>;
  testClient: TestClient<"anvil", Transport, Chain>;
  /** Funded anvil accounts. By convention 0 deploys and owns, 1 acts as the bundler. */
  wallets: DevWalletClient[];
  stop(): Promise<void>;
}

export interface StartChainOptions {
  chainId?: number;
  /** Mine a block every this many seconds; by default every transaction is mined at once. */
  blockTimeSec?: number;
  /** Listen on this port (a chain restarted where the service expects it); by default a free one. */
  port?: number;
}

export async function startChain(options: StartChainOptions = {}): Promise<DevChain> {
  const chainId = options.chainId ?? DEVNET_CHAIN_ID;
  const port = options.port ?? (await freePort());
  const args = ["--port", String(port), "--host", "127.0.0.1", "--chain-id", String(chainId), "--silent"];
  if (options.blockTimeSec !== undefined) args.push("--block-time", String(options.blockTimeSec));

  const child = spawn(anvilBinary(), args, { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  // A test runner that dies mid-file must not leave anvil behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);

  const rpcUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForRpc(rpcUrl, child, () => stderr);
  } catch (err) {
    child.kill("SIGKILL");
    process.removeListener("exit", killOnExit);
    throw err;
  }

  const chain = devnetChain(chainId, rpcUrl);
  // Poll fast: a local node mines in milliseconds, viem's default interval is 4 s.
  const transport = http(rpcUrl);
  const clientOptions = { chain, transport, pollingInterval: 50, cacheTime: 0 };
  const wallets = Array.from({ length: FUNDED_ACCOUNT_COUNT }, (_, addressIndex) =>
    createWalletClient({ ...clientOptions, account: devAccount(addressIndex) }),
  );
  return {
    rpcUrl,
    chainId,
    chain,
    publicClient: createPublicClient(clientOptions),
    testClient: createTestClient({ ...clientOptions, mode: "anvil" }),
    wallets,
    stop: () => stopProcess(child, killOnExit),
  };
}

export function devnetChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `anvil ${chainId}`,
    nativeCurrency: { name: "Sonic", symbol: "S", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

/**
 * The anvil binary: ANVIL_BIN when set; else the platform package's binary (the lock file holds,
 * with an integrity hash, only the platform packages the registry has: Linux x64); else an
 * `anvil` on PATH (Foundry's installer, foundryup, on macOS and Linux arm64). The binary itself,
 * never a Node wrapper, so that stopping the chain signals anvil directly.
 */
function anvilBinary(): string {
  if (process.env.ANVIL_BIN) return process.env.ANVIL_BIN;
  const require = createRequire(import.meta.url);
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const exe = process.platform === "win32" ? "anvil.exe" : "anvil";
  try {
    const pkg = require.resolve(`@foundry-rs/anvil-${process.platform}-${arch}/package.json`);
    const binary = join(dirname(pkg), "bin", exe);
    if (existsSync(binary)) return binary;
  } catch {
    // No platform package for this machine: look on PATH.
  }
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir && existsSync(join(dir, exe))) return join(dir, exe);
  }
  throw new Error(
    `no anvil for ${process.platform}-${process.arch}: npm ci installs it on Linux x64 only; ` +
      "install Foundry's anvil (foundryup) or set ANVIL_BIN to its path",
  );
}

async function waitForRpc(rpcUrl: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] });
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`anvil exited during startup (${child.exitCode ?? child.signalCode}): ${stderr()}`);
    }
    try {
      const res = await fetch(rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      if (res.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`anvil did not answer on ${rpcUrl} within ${STARTUP_TIMEOUT_MS} ms: ${stderr()}`);
}

function stopProcess(child: ChildProcess, killOnExit: () => void): Promise<void> {
  process.removeListener("exit", killOnExit);
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 3_000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}
