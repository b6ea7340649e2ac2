/**
 * Deploys the whole sponsorship stack on a local chain: the canonical EntryPoint v0.7,
 * SimpleAccountFactory, SponsorPaymaster v2 (funded and staked) and the GameItems test contract;
 * beside them EntryPoint v0.8 with its own SponsorPaymasterV08 (funded and staked),
 * Simple7702Account and SimpleAccountFactory, all three release contracts at their canonical
 * addresses (`stack.v08`); and, on request, the adversarial test contracts (AdversarialAccount,
 * BundleForwarder). Used by the chain tests and `npm run demo`.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import {
  type Abi,
  type Address,
  concatHex,
  encodeAbiParameters,
  getAddress,
  getContractAddress,
  type Hex,
  parseAbi,
  parseEther,
  type TransactionReceipt,
} from "viem";
import { entryPoint07Address, entryPoint08Address } from "viem/account-abstraction";
import { sponsorPaymasterAbi } from "../../../src/paymaster/abi.ts";
import { PAYMASTER_GAS_LIMITS } from "../../../src/paymaster/gas.ts";

export { PAYMASTER_GAS_LIMITS, sponsorPaymasterAbi };

import type { DevChain, DevWalletClient } from "./anvil.ts";

export const ENTRY_POINT_V07_ADDRESS: Address = entryPoint07Address;

/** The keyless deterministic deployer (Arachnid) that anvil ships at genesis. */
export const CREATE2_DEPLOYER_ADDRESS: Address = "0x4e59b44847b379578588920ca78fbf26c0b4956c";

/** The salt the EntryPoint v0.7 release was deployed with on every public chain. */
export const ENTRY_POINT_V07_SALT: Hex = "0x90d8084deab30c2a37c45e8d47f49f2f7965183cb6990a98943ef94940681de3";

export const ENTRY_POINT_V08_ADDRESS: Address = entryPoint08Address;

/** The salt the EntryPoint v0.8 release was deployed with through the CREATE2 deployer. */
export const ENTRY_POINT_V08_SALT: Hex = "0x0a59dbff790c23c976a548690c27297883cc66b4c67024f9117b0238995e35e9";

/**
 * v0.8's Simple7702Account (the implementation EIP-7702 EOAs delegate to; viem's and
 * permissionless's default) and SimpleAccountFactory (permissionless's default for v0.8), both
 * deployed through the CREATE2 deployer with salt zero, the factory with the EntryPoint as its
 * constructor argument.
 */
export const SIMPLE_7702_ACCOUNT_V08_ADDRESS: Address = "0xe6Cae83BdE06E4c305530e199D7217f42808555B";
export const SIMPLE_ACCOUNT_FACTORY_V08_ADDRESS: Address = "0x13E9ed32155810FDbd067D4522C492D6f68E5944";
const RELEASE_V08_ACCOUNT_SALT: Hex = "0x0000000000000000000000000000000000000000000000000000000000000000";

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
  | "SponsorPaymasterV08"
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

/** An artifact shipped by @account-abstraction/contracts 0.8.0 (installed as `…/contracts-v08`). */
export function accountAbstractionV08Artifact(
  name:
    | "EntryPoint"
    | "EntryPointSimulations"
    | "SimpleAccountFactory"
    | "Simple7702Account"
    | "SimpleAccount",
): CompiledArtifact & { deployedBytecode: Hex } {
  const require = createRequire(import.meta.url);
  return require(`@account-abstraction/contracts-v08/artifacts/${name}.json`);
}

export type EntryPointDeployment = "existing" | "create2" | "setCode";

/** The EntryPoint v0.8 half of the stack: its own paymaster and v0.8's sample accounts. */
export interface DevnetStackV08 {
  entryPointVersion: "0.8";
  entryPoint: Address;
  entryPointDeployment: EntryPointDeployment;
  /** SponsorPaymasterV08, funded and staked in EntryPoint v0.8, same signer as the v0.7 one. */
  paymaster: Address;
  /** The implementation EIP-7702 EOAs delegate to. */
  simple7702Account: Address;
  /** v0.8's SimpleAccountFactory (only its SenderCreator may call createAccount). */
  accountFactory: Address;
}

export interface DevnetStack {
  entryPoint: Address;
  /** How the EntryPoint got to its canonical address on this chain. */
  entryPointDeployment: EntryPointDeployment;
  accountFactory: Address;
  paymaster: Address;
  gameItems: Address;
  /** Deployer and owner of the paymaster (wallet 0). */
  owner: Address;
  /** EntryPoint v0.8 and what goes with it, deployed after (so beside) everything above. */
  v08: DevnetStackV08;
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
  await fundAndStake(chain, paymaster, options);
  // v0.8 comes last, so every v0.7 address stays what it was before v0.8 was added.
  const v08 = await deployStackV08(chain, options);
  return {
    entryPoint,
    entryPointDeployment,
    accountFactory,
    paymaster,
    gameItems,
    owner: deployer.account.address,
    v08,
  };
}

/** EntryPoint v0.8, its SponsorPaymasterV08 (funded and staked) and v0.8's sample accounts. */
export async function deployStackV08(
  chain: ChainHandles,
  options: DeployStackOptions,
): Promise<DevnetStackV08> {
  const ep = accountAbstractionV08Artifact("EntryPoint");
  const { address: entryPoint, method: entryPointDeployment } = await deployCanonical(chain, {
    address: ENTRY_POINT_V08_ADDRESS,
    salt: ENTRY_POINT_V08_SALT,
    initCode: ep.bytecode,
    runtimeCode: ep.deployedBytecode,
  });
  const simple7702 = accountAbstractionV08Artifact("Simple7702Account");
  const { address: simple7702Account } = await deployCanonical(chain, {
    address: SIMPLE_7702_ACCOUNT_V08_ADDRESS,
    salt: RELEASE_V08_ACCOUNT_SALT,
    initCode: simple7702.bytecode,
    // No constructor and no immutables (its EntryPoint is a constant): the runtime code suffices.
    runtimeCode: simple7702.deployedBytecode,
  });
  // The factory's constructor deploys its account implementation and reads the EntryPoint's
  // SenderCreator into immutables, so only running it gives working code: no setCode fallback.
  const factory = accountAbstractionV08Artifact("SimpleAccountFactory");
  const { address: accountFactory } = await deployCanonical(chain, {
    address: SIMPLE_ACCOUNT_FACTORY_V08_ADDRESS,
    salt: RELEASE_V08_ACCOUNT_SALT,
    initCode: concatHex([factory.bytecode, encodeAbiParameters([{ type: "address" }], [entryPoint])]),
    runtimeCode: null,
  });
  const paymaster = await deploy(chain, chain.wallets[0]!, localArtifact("SponsorPaymasterV08"), [
    entryPoint,
    options.signer,
  ]);
  await fundAndStake(chain, paymaster, options);
  return {
    entryPointVersion: "0.8",
    entryPoint,
    entryPointDeployment,
    paymaster,
    simple7702Account,
    accountFactory,
  };
}

/** Deposits into the paymaster's EntryPoint balance and stakes it, from wallet 0 (its owner). */
async function fundAndStake(
  chain: ChainHandles,
  paymaster: Address,
  options: DeployStackOptions,
): Promise<void> {
  const deployer = chain.wallets[0]!;
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
  const artifact = accountAbstractionArtifact("EntryPoint");
  return deployCanonical(chain, {
    address: ENTRY_POINT_V07_ADDRESS,
    salt: ENTRY_POINT_V07_SALT,
    initCode: artifact.bytecode,
    runtimeCode: artifact.deployedBytecode,
  });
}

interface CanonicalDeployment {
  /** Where the release lives on public chains. */
  address: Address;
  salt: Hex;
  /** Creation code with any constructor arguments appended. */
  initCode: Hex;
  /** Installed with anvil_setCode when CREATE2 lands elsewhere; null when that cannot work. */
  runtimeCode: Hex | null;
}

/**
 * A release contract at its canonical address: nothing to do if code is there, else its init
 * code through the CREATE2 deployer with the release salt (how it got there on public chains),
 * else, when that would land elsewhere, its runtime code by anvil_setCode.
 */
async function deployCanonical(
  chain: ChainHandles,
  d: CanonicalDeployment,
): Promise<{ address: Address; method: EntryPointDeployment }> {
  const { address } = d;
  if (await hasCode(chain, address)) return { address, method: "existing" };
  const predicted = getContractAddress({
    opcode: "CREATE2",
    from: CREATE2_DEPLOYER_ADDRESS,
    salt: d.salt,
    bytecode: d.initCode,
  });
  if (predicted.toLowerCase() === address.toLowerCase() && (await hasCode(chain, CREATE2_DEPLOYER_ADDRESS))) {
    const hash = await chain.wallets[0]!.sendTransaction({
      to: CREATE2_DEPLOYER_ADDRESS,
      data: concatHex([d.salt, d.initCode]),
    });
    await confirm(chain, hash);
    if (await hasCode(chain, address)) return { address, method: "create2" };
  }
  if (d.runtimeCode === null) throw new Error(`${address}: CREATE2 does not reproduce the release address`);
  await chain.testClient.setCode({ address, bytecode: d.runtimeCode });
  if (!(await hasCode(chain, address))) throw new Error(`${address}: code could not be installed`);
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
