/**
 * Where an operator command acts: the chain (its RPC from the flags or the service's own
 * settings), the EntryPoint version, the paymaster, and, for commands that send transactions, the
 * owner's key from OPERATOR_PRIVATE_KEY. The key is read from the environment only (never a flag,
 * so it stays out of shell history and process listings) and is never printed: every message
 * about it names the variable, not the value.
 */
import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  isHex,
  type LocalAccount,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type Config, ConfigError, type EntryPointVersion, loadConfig } from "../config.ts";
import { addressFlag, type ConnectionFlags, UsageError } from "./args.ts";

/** An expected failure: printed as one line, exit status 1, no stack trace. */
export class OperatorError extends Error {}

export const OPERATOR_KEY_VARIABLE = "OPERATOR_PRIVATE_KEY";

export type Env = Record<string, string | undefined>;

export interface Io {
  /** Results: what a script would capture (one line each). */
  out(line: string): void;
  /** Progress and diagnostics. */
  err(line: string): void;
}

export interface Target {
  chainId: number;
  chain: Chain;
  rpcUrl: string;
  version: EntryPointVersion;
  entryPoint: Address;
  /** Null when neither --paymaster nor the setting names one (only deploy can do without). */
  paymaster: Address | null;
  /** The environment variable the service reads this paymaster from. */
  paymasterSetting: string;
  currency: string;
  /** Decimals of the chain's native currency (18 for S and ETH). */
  decimals: number;
  config: Config;
}

export interface Clients {
  target: Target;
  publicClient: PublicClient<Transport, Chain>;
}

export interface WriteClients extends Clients {
  wallet: WalletClient<Transport, Chain, LocalAccount>;
}

const DEFAULT_CHAIN_ID = 14601;

export function readConfig(env: Env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) throw new OperatorError(err.message.replace(/\n\s*-\s*/g, " "));
    throw err;
  }
}

/** The chain, EntryPoint and paymaster a command addresses, from the flags over the settings. */
export function resolveTarget(flags: ConnectionFlags, config: Config): Target {
  const chainId = flags.chainId ?? DEFAULT_CHAIN_ID;
  const chainConfig = config.chains.find((c) => c.chainId === chainId);
  if (!chainConfig) {
    // Only --chain-id can name another chain: a command-line mistake, and the value is not repeated.
    const known = config.chains.map((c) => c.chainId).join(", ");
    throw new UsageError(`--chain-id names a chain the service does not know (it knows ${known})`);
  }
  const version = flags.entryPointVersion ?? "0.7";
  const entry = chainConfig.entryPoints.find((e) => e.version === version)!;
  const paymasterSetting = `CHAIN_${chainId}_PAYMASTER${version === "0.8" ? "_V08" : ""}_ADDRESS`;
  const paymaster =
    flags.paymaster !== undefined ? addressFlag("--paymaster", flags.paymaster) : entry.paymaster;
  const rpcUrl = flags.rpcUrl ?? chainConfig.rpcUrl;
  // --rpc-url was checked with the command line, and CHAIN_<id>_RPC_URL by the configuration.
  const chain = defineChain({
    id: chainId,
    name: chainConfig.name,
    nativeCurrency: chainConfig.nativeCurrency,
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  return {
    chainId,
    chain,
    rpcUrl,
    version,
    entryPoint: getAddress(entry.entryPoint),
    paymaster: paymaster ? getAddress(paymaster) : null,
    paymasterSetting,
    currency: chainConfig.nativeCurrency.symbol,
    decimals: chainConfig.nativeCurrency.decimals,
    config,
  };
}

/** The paymaster of the target, or an error naming the flag and the setting that would give it. */
export function requirePaymaster(target: Target): Address {
  if (target.paymaster) return target.paymaster;
  throw new OperatorError(`no paymaster: pass --paymaster or set ${target.paymasterSetting}`);
}

/**
 * A client for the target, after checking that the RPC serves the chain the command means: a
 * mainnet RPC given by mistake is refused before anything is read or sent.
 */
export async function connect(target: Target): Promise<Clients> {
  const publicClient = createPublicClient({
    chain: target.chain,
    transport: http(target.rpcUrl, { timeout: 20_000, retryCount: 1 }),
    pollingInterval: 500,
    cacheTime: 0,
  });
  let rpcChainId: number;
  try {
    rpcChainId = await publicClient.getChainId();
  } catch {
    throw new OperatorError(`the RPC at ${rpcHost(target.rpcUrl)} does not answer`);
  }
  if (rpcChainId !== target.chainId) {
    throw new OperatorError(
      `the RPC at ${rpcHost(target.rpcUrl)} serves chain ${rpcChainId}, not ${target.chainId}`,
    );
  }
  return { target, publicClient };
}

/** connect, plus a wallet for the key in OPERATOR_PRIVATE_KEY. */
export async function connectWithKey(target: Target, env: Env): Promise<WriteClients> {
  const account = operatorAccount(env);
  const clients = await connect(target);
  const wallet = createWalletClient({
    account,
    chain: target.chain,
    transport: http(target.rpcUrl, { timeout: 20_000, retryCount: 1 }),
    pollingInterval: 500,
    cacheTime: 0,
  });
  return { ...clients, wallet };
}

export function operatorAccount(env: Env): LocalAccount {
  const raw = env[OPERATOR_KEY_VARIABLE];
  if (raw === undefined || raw === "") {
    throw new OperatorError(`set ${OPERATOR_KEY_VARIABLE} to the paymaster owner's key (32 bytes of hex)`);
  }
  const hex = (raw.startsWith("0x") ? raw : `0x${raw}`) as Hex;
  // The value is never quoted back: a malformed secret must not reach a terminal or a CI log.
  if (!isHex(hex) || hex.length !== 66)
    throw new OperatorError(`${OPERATOR_KEY_VARIABLE} is not 32 bytes of hex`);
  try {
    return privateKeyToAccount(hex);
  } catch {
    throw new OperatorError(`${OPERATOR_KEY_VARIABLE} is not a valid secp256k1 private key`);
  }
}

/**
 * The RPC's host only: provider URLs often carry an API key in their path or query, and the
 * service never shows RPC URLs either.
 */
export function rpcHost(rpcUrl: string): string {
  try {
    return new URL(rpcUrl).host;
  } catch {
    return "(unparseable URL)";
  }
}
