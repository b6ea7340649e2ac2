/**
 * Deploys the whole sponsorship stack on a local chain: the canonical EntryPoint v0.7,
 * SimpleAccountFactory, SponsorPaymaster v2 (funded and staked) and the GameItems test contract;
 * and, on request, the adversarial test contracts (AdversarialAccount, BundleForwarder).
 * Used by the chain tests and `npm run demo`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import {
  type Abi,
  type Address,
  concatHex,
  getAddress,
  getContractAddress,
  type Hex,
  parseAbi,
  parseEther,
  type TransactionReceipt,
} from "viem";
import { entryPoint07Address } from "viem/account-abstraction";
import { sponsorPaymasterAbi } from "../../../src/paymaster/abi.ts";
import { PAYMASTER_GAS_LIMITS } from "../../../src/paymaster/gas.ts";

export { PAYMASTER_GAS_LIMITS, sponsorPaymasterAbi };

import type { DevChain, DevWalletClient } from "./anvil.ts";

export const ENTRY_POINT_V07_ADDRESS: Address = entryPoint07Address;

/** The keyless deterministic deployer (Arachnid) that anvil ships at genesis. */
export const CREATE2_DEPLOYER_ADDRESS: Address = "0x4e59b44847b379578588920ca78fbf26c0b4956c";

/** The salt the EntryPoint v0.7 release was deployed with on every public chain. */
export const ENTRY_POINT_V07_SALT: Hex = "0x90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3";

export const gameItemsAbi = parseAbi([
  "function mint(uint256 itemId)",
  "function fail() pure",
  "function itemsOf(address player, uint256 itemId) view returns (uint256)",
  "event ItemMinted(address indexed player, uint256 indexed itemId, uint256 newCount)",
  "error AlwaysFails()",
]);

/** A test contract that pays other addresses from inside a call (the deposit watcher's tests). */
export const valueForwarderAbi = parseAbi([
  "function forward(address to) payable",
  "function split(address first, address second) payable",
  "function forwardUndone(address to) payable",
  "function sendThenRevert(address to) payable",
  "function destroy(address to) payable",
  "error Undone()",
  "error ForwardFailed()",
]);

/**
 * An account as a hostile player would write it (contracts/test/AdversarialAccount.sol): any
 * signature validates, and `execute` can end in a revert carrying `revertBytes` bytes of data.
 */
export const adversarialAccountAbi = parseAbi([
  "function revertBytes() view returns (uint256)",
  "function setRevertBytes(uint256 revertBytes_)",
  "function validateUserOp((address sender, uint256 nonce, bytes initCode, bytes callData, bytes32 accountGasLimits, uint256 preVerificationGas, bytes32 gasFees, bytes paymasterAndData, bytes signature) userOp, bytes32 userOpHash, uint256 missingAccountFunds) returns (uint256 validationData)",
  "function execute(address dest, uint256 value, bytes func)",
  "event RevertBytesChanged(uint256 revertBytes)",
]);

/** Submits bundles to the EntryPoint from a contract (contracts/test/BundleForwarder.sol). */
export const bundleForwarderAbi = parseAbi([
  "struct PackedUserOperation { address sender; uint256 nonce; bytes initCode; bytes callData; bytes32 accountGasLimits; uint256 preVerificationGas; bytes32 gasFees; bytes paymasterAndData; bytes signature; }",
  "struct UserOpsPerAggregator { PackedUserOperation[] userOps; address aggregator; bytes signature; }",
  "function forwardHandleOps(address ep, PackedUserOperation[] ops, address beneficiary)",
  "function forwardAggregatedOps(address ep, UserOpsPerAggregator[] opsPerAggregator, address beneficiary)",
]);

export type LocalContractName =
  | "SponsorPaymaster"
  | "GameItems"
  | "ValueForwarder"
  | "AdversarialAccount"
  | "BundleForwarder";

export interface CompiledArtifact {
  abi: Abi;
  bytecode: Hex;
}

/** An artifact built by `npm run build:contracts` (contracts/artifacts/<name>.json). */
export function localArtifact(name: LocalContractName): CompiledArtifact {
  const url = new URL(`../../../contracts/artifacts/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8"));
}

/** An artifact shipped by @account-abstraction/contracts 0.7.0 (the audited release build). */
export function accountAbstractionArtifact(
  name: "EntryPoint" | "EntryPointSimulations" | "SimpleAccountFactory",
): CompiledArtifact & { deployedBytecode: Hex } {
  const require = createRequire(import.meta.url);
  return require(`@account-abstraction/contracts/artifacts/${name}.json`);
}

export interface DevnetStack {
  entryPoint: Address;
  /** How the EntryPoint got to its canonical address on this chain. */
  entryPointDeployment: "existing" | "create2" | "setCode";
  accountFactory: Address;
  paymaster: Address;
  gameItems: Address;
  /** Deployer and owner of the paymaster (wallet 0). */
  owner: Address;
}

export interface DeployStackOptions {
  /** The key whose EIP-712 signatures the paymaster honours. */
  signer: Address;
  /** Paymaster deposit in the EntryPoint; gas of sponsored operations is paid from it. */
  depositWei?: bigint;
  /** Paymaster stake; ERC-7562 requires it because validation touches the paymaster's storage. */
  stakeWei?: bigint;
  unstakeDelaySec?: number;
}

type ChainHandles = Pick<DevChain, "publicClient" | "testClient" | "wallets">;

export async function deployStack(chain: ChainHandles, options: DeployStackOptions): Promise<DevnetStack> {
  const deployer = chain.wallets[0]!;
  const { address: entryPoint, method: entryPointDeployment } = await deployEntryPoint(chain);
  const factoryArtifact = accountAbstractionArtifact("SimpleAccountFactory");
  const accountFactory = await deploy(chain, deployer, factoryArtifact, [entryPoint]);
  const paymaster = await deploy(chain, deployer, localArtifact("SponsorPaymaster"), [
    entryPoint,
    options.signer,
  ]);
  const gameItems = await deploy(chain, deployer, localArtifact("GameItems"), []);

  await confirm(
    chain,
    await deployer.writeContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "deposit",
      value: options.depositWei ?? parseEther("10"),
    }),
  );
  await confirm(
    chain,
    await deployer.writeContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "addStake",
      args: [options.unstakeDelaySec ?? 86_400],
      value: options.stakeWei ?? parseEther("1"),
    }),
  );
  return {
    entryPoint,
    entryPointDeployment,
    accountFactory,
    paymaster,
    gameItems,
    owner: deployer.account.address,
  };
}

/**
 * Deploys an AdversarialAccount whose `execute` ends in a revert with `revertBytes` bytes of data
 * (0 = no revert). It needs no factory and no owner: it is its own sender, with nonce key 0.
 */
export async function deployAdversarialAccount(chain: ChainHandles, revertBytes = 0n): Promise<Address> {
  return deploy(chain, chain.wallets[0]!, localArtifact("AdversarialAccount"), [revertBytes]);
}

/** Deploys a BundleForwarder (stateless: one per chain is enough). */
export async function deployBundleForwarder(chain: ChainHandles): Promise<Address> {
  return deploy(chain, chain.wallets[0]!, localArtifact("BundleForwarder"), []);
}

/**
 * Puts EntryPoint v0.7 at its canonical address the way it got there on public chains: the
 * release init code sent through the CREATE2 deployer with the release salt. If the result
 * lands anywhere else (a different compiler output), the release runtime code is installed
 * with anvil_setCode instead, and the method says so.
 */
export async function deployEntryPoint(
  chain: ChainHandles,
): Promise<{ address: Address; method: DevnetStack["entryPointDeployment"] }> {
  const { publicClient, testClient } = chain;
  const address = ENTRY_POINT_V07_ADDRESS;
  if (await hasCode(chain, address)) return { address, method: "existing" };

  const artifact = accountAbstractionArtifact("EntryPoint");
  const predicted = getContractAddress({
    opcode: "CREATE2",
    from: CREATE2_DEPLOYER_ADDRESS,
    salt: ENTRY_POINT_V07_SALT,
    bytecode: artifact.bytecode,
  });
  if (predicted.toLowerCase() === address.toLowerCase() && (await hasCode(chain, CREATE2_DEPLOYER_ADDRESS))) {
    const hash = await chain.wallets[0]!.sendTransaction({
      to: CREATE2_DEPLOYER_ADDRESS,
      data: concatHex([ENTRY_POINT_V07_SALT, artifact.bytecode]),
    });
    await confirm(chain, hash);
    if (await hasCode(chain, address)) return { address, method: "create2" };
  }
  await testClient.setCode({ address, bytecode: artifact.deployedBytecode });
  if (!(await publicClient.getCode({ address }))) throw new Error("EntryPoint could not be installed");
  return { address, method: "setCode" };
}

async function deploy(
  chain: ChainHandles,
  deployer: DevWalletClient,
  artifact: CompiledArtifact,
  args: readonly unknown[],
): Promise<Address> {
  const hash = await deployer.deployContract({ abi: artifact.abi, bytecode: artifact.bytecode, args });
  const receipt = await confirm(chain, hash);
  if (!receipt.contractAddress) throw new Error(`deployment ${hash} created no contract`);
  return getAddress(receipt.contractAddress);
}

async function confirm(chain: ChainHandles, hash: Hex): Promise<TransactionReceipt> {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
  return receipt;
}

async function hasCode(chain: ChainHandles, address: Address): Promise<boolean> {
  const code = await chain.publicClient.getCode({ address });
  return code !== undefined && code !== "0x";
}
