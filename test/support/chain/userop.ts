/**
 * Builds, signs and submits ERC-4337 v0.7 user operations from SimpleAccount (0.7.0) accounts,
 * the way a wallet and a bundler would. Used by the chain tests, the service's end-to-end
 * tests and `npm run demo`; the service itself only ever signs the paymaster part.
 */
import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  concatHex,
  encodeFunctionData,
  type Hex,
  type LocalAccount,
  numberToHex,
  type PublicClient,
  parseAbi,
  type TransactionReceipt,
  zeroAddress,
} from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import type { PaymasterGasLimits } from "../../../src/paymaster/gas.ts";
import type { DevWalletClient } from "./anvil.ts";
import { bundleForwarderAbi } from "./devnet.ts";

export const simpleAccountFactoryAbi = parseAbi([
  "function getAddress(address owner, uint256 salt) view returns (address)",
  "function createAccount(address owner, uint256 salt) returns (address)",
]);

export const simpleAccountAbi = parseAbi(["function execute(address dest, uint256 value, bytes func)"]);

/** The account's own gas limits and fee caps (the paymaster's limits travel in paymasterAndData). */
export interface UserOpGas {
  verificationGasLimit: bigint;
  callGasLimit: bigint;
  preVerificationGas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/**
 * Generous enough for a first operation that also deploys the account (about 300k gas of
 * validation) and a simple game call. Fee caps suit anvil, whose base fee starts at 1 gwei.
 */
export const devnetUserOpGas: UserOpGas = {
  verificationGasLimit: 500_000n,
  callGasLimit: 200_000n,
  preVerificationGas: 60_000n,
  maxFeePerGas: 5_000_000_000n,
  maxPriorityFeePerGas: 1_000_000_000n,
};

type Reader = Pick<PublicClient, "readContract">;

/** The counterfactual SimpleAccount address of `owner`, deployed or not. */
export function getAccountAddress(
  client: Reader,
  factory: Address,
  owner: Address,
  salt = 0n,
): Promise<Address> {
  return client.readContract({
    address: factory,
    abi: simpleAccountFactoryAbi,
    functionName: "getAddress",
    args: [owner, salt],
  });
}

/** initCode for an account's first operation: the factory, then its createAccount call. */
export function accountInitCode(factory: Address, owner: Address, salt = 0n): Hex {
  const call = encodeFunctionData({
    abi: simpleAccountFactoryAbi,
    functionName: "createAccount",
    args: [owner, salt],
  });
  return concatHex([factory, call]);
}

/** SimpleAccount callData that calls `target` with `data` (the shape the paymaster accepts). */
export function executeCallData(target: Address, data: Hex, valueWei = 0n): Hex {
  return encodeFunctionData({
    abi: simpleAccountAbi,
    functionName: "execute",
    args: [target, valueWei, data],
  });
}

/** The next nonce of `sender` in the EntryPoint (key 0, sequential). */
export function getAccountNonce(client: Reader, entryPoint: Address, sender: Address): Promise<bigint> {
  return client.readContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "getNonce",
    args: [sender, 0n],
  });
}

/** Two 128-bit values in one 32-byte word, `high` first, as v0.7 packs gas fields. */
export function packUint128Pair(high: bigint, low: bigint): Hex {
  return concatHex([numberToHex(high, { size: 16 }), numberToHex(low, { size: 16 })]);
}

export interface BuildUserOpParams {
  sender: Address;
  nonce: bigint;
  /** Only for the account's first operation (see accountInitCode). */
  initCode?: Hex;
  callData: Hex;
  gas: UserOpGas;
  paymasterAndData?: Hex;
  signature?: Hex;
}

export function buildUserOp(p: BuildUserOpParams): PackedUserOperation {
  return {
    sender: p.sender,
    nonce: p.nonce,
    initCode: p.initCode ?? "0x",
    callData: p.callData,
    accountGasLimits: packUint128Pair(p.gas.verificationGasLimit, p.gas.callGasLimit),
    preVerificationGas: p.gas.preVerificationGas,
    gasFees: packUint128Pair(p.gas.maxPriorityFeePerGas, p.gas.maxFeePerGas),
    paymasterAndData: p.paymasterAndData ?? "0x",
    signature: p.signature ?? "0x",
  };
}

/**
 * Every gas limit of an operation added up: what a call authorization's maxTotalGas bounds.
 */
export function totalGasLimit(gas: UserOpGas, paymasterGas: PaymasterGasLimits): bigint {
  return (
    gas.verificationGasLimit +
    gas.callGasLimit +
    gas.preVerificationGas +
    paymasterGas.verificationGasLimit +
    paymasterGas.postOpGasLimit
  );
}

/**
 * The EntryPoint's `maxCost` for an operation: every gas limit times maxFeePerGas. This is the
 * prefund it takes from the paymaster's deposit during validation, the most the operation can
 * cost, and exactly what it costs on the EntryPoint's prefund-too-low path.
 */
export function requiredPrefundWei(gas: UserOpGas, paymasterGas: PaymasterGasLimits): bigint {
  return totalGasLimit(gas, paymasterGas) * gas.maxFeePerGas;
}

/** The hash the account signs, as the EntryPoint computes it (it covers the chain id and itself). */
export function getUserOpHash(
  client: Reader,
  entryPoint: Address,
  userOp: PackedUserOperation,
): Promise<Hex> {
  return client.readContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "getUserOpHash",
    args: [userOp],
  });
}

/**
 * SimpleAccount 0.7 recovers its owner from toEthSignedMessageHash(userOpHash): an EIP-191
 * personal signature over the 32 raw bytes of the hash.
 */
export async function signUserOp(
  client: Reader,
  entryPoint: Address,
  owner: LocalAccount,
  userOp: PackedUserOperation,
): Promise<{ userOp: PackedUserOperation; userOpHash: Hex }> {
  const userOpHash = await getUserOpHash(client, entryPoint, userOp);
  const signature = await owner.signMessage({ message: { raw: userOpHash } });
  return { userOp: { ...userOp, signature }, userOpHash };
}

export interface HandleOpsOptions {
  /** Who receives the gas refund; the bundler itself by default. */
  beneficiary?: Address;
  /**
   * A fixed transaction gas limit. Without it viem estimates first, and a refused operation
   * throws before anything is sent; with it the transaction is mined and reverts on chain.
   */
  gas?: bigint;
}

/**
 * Submits `handleOps` from `bundler` and waits for the receipt. A refused operation makes
 * handleOps revert: a thrown viem error (see failedOpOf) or, with a fixed gas limit, a
 * receipt whose status is "reverted".
 */
export async function handleOps(
  client: Pick<PublicClient, "waitForTransactionReceipt">,
  bundler: DevWalletClient,
  entryPoint: Address,
  userOps: PackedUserOperation[],
  options: HandleOpsOptions = {},
): Promise<TransactionReceipt> {
  const hash = await bundler.writeContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "handleOps",
    args: [userOps, options.beneficiary ?? bundler.account.address],
    gas: options.gas,
  });
  return client.waitForTransactionReceipt({ hash });
}

/**
 * The same bundle through `handleAggregatedOps` with one group whose aggregator is address(0):
 * accounts that check their own signatures, which the EntryPoint accepts on this path too.
 */
export async function handleAggregatedOps(
  client: Pick<PublicClient, "waitForTransactionReceipt">,
  bundler: DevWalletClient,
  entryPoint: Address,
  userOps: PackedUserOperation[],
  options: HandleOpsOptions = {},
): Promise<TransactionReceipt> {
  const hash = await bundler.writeContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "handleAggregatedOps",
    args: [
      [{ userOps, aggregator: zeroAddress, signature: "0x" }],
      options.beneficiary ?? bundler.account.address,
    ],
    gas: options.gas,
  });
  return client.waitForTransactionReceipt({ hash });
}

/**
 * The bundle submitted by a BundleForwarder contract (test/support/chain/devnet.ts), through
 * `handleOps` or, with `aggregated`, `handleAggregatedOps` with aggregator address(0). The
 * transaction is sent to the forwarder, not to the EntryPoint.
 */
export async function forwardOps(
  client: Pick<PublicClient, "waitForTransactionReceipt">,
  bundler: DevWalletClient,
  forwarder: Address,
  entryPoint: Address,
  userOps: PackedUserOperation[],
  options: HandleOpsOptions & { aggregated?: boolean } = {},
): Promise<TransactionReceipt> {
  const beneficiary = options.beneficiary ?? bundler.account.address;
  const hash = options.aggregated
    ? await bundler.writeContract({
        address: forwarder,
        abi: bundleForwarderAbi,
        functionName: "forwardAggregatedOps",
        args: [entryPoint, [{ userOps, aggregator: zeroAddress, signature: "0x" }], beneficiary],
        gas: options.gas,
      })
    : await bundler.writeContract({
        address: forwarder,
        abi: bundleForwarderAbi,
        functionName: "forwardHandleOps",
        args: [entryPoint, userOps, beneficiary],
        gas: options.gas,
      });
  return client.waitForTransactionReceipt({ hash });
}

export interface FailedOp {
  opIndex: bigint;
  /** The EntryPoint's "AAxx ..." code. */
  reason: string;
  /** The revert data of the account or paymaster, for FailedOpWithRevert. */
  inner?: Hex;
}

/** The EntryPoint's FailedOp / FailedOpWithRevert inside a viem error, if that is what it is. */
export function failedOpOf(err: unknown): FailedOp | undefined {
  if (!(err instanceof BaseError)) return undefined;
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
  if (!(reverted instanceof ContractFunctionRevertedError) || !reverted.data) return undefined;
  const { errorName, args } = reverted.data;
  if (errorName === "FailedOp") {
    const [opIndex, reason] = args as readonly [bigint, string];
    return { opIndex, reason };
  }
  if (errorName === "FailedOpWithRevert") {
    const [opIndex, reason, inner] = args as readonly [bigint, string, Hex];
    return { opIndex, reason, inner };
  }
  return undefined;
}

/**
 * Runs handleOps as an eth_call, as a bundler does before including operations. Resolves to
 * the EntryPoint's refusal, or undefined when every operation would be accepted.
 */
export async function simulateHandleOps(
  client: Pick<PublicClient, "simulateContract">,
  bundler: Address,
  entryPoint: Address,
  userOps: PackedUserOperation[],
): Promise<FailedOp | undefined> {
  try {
    await client.simulateContract({
      account: bundler,
      address: entryPoint,
      abi: entryPoint07Abi,
      functionName: "handleOps",
      args: [userOps, bundler],
    });
    return undefined;
  } catch (err) {
    const failed = failedOpOf(err);
    if (failed) return failed;
    throw err;
  }
}
