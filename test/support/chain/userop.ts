/**
 * Builds, signs and submits ERC-4337 user operations the way a wallet and a bundler would: for
 * EntryPoint v0.7 from SimpleAccount (0.7.0) accounts, and for EntryPoint v0.8 from its
 * SimpleAccount and from EOAs delegated to Simple7702Account (EIP-7702). The two EntryPoints share
 * the ABI used here (handleOps, getNonce, getUserOpHash, FailedOp); they differ in the hash an
 * account signs (see signUserOp). Used by the chain tests, the service's end-to-end tests and
 * `npm run demo`; the service itself only ever signs the paymaster part.
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
  type SignedAuthorization,
  type StateOverride,
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

/** The code an EIP-7702 delegation gives an EOA: the designator 0xef0100 and the delegate. */
export function delegationCode(delegate: Address): Hex {
  return concatHex(["0xef0100", delegate]);
}

/**
 * A state override that shows `sender` as delegated to `delegate`: EntryPoint v0.8 reads the
 * delegate from the sender's code to hash an EIP-7702 operation, and an eth_call made before the
 * bundle that carries the authorization has to see the delegation it will install.
 */
export function delegationOverride(sender: Address, delegate: Address): StateOverride {
  return [{ address: sender, code: delegationCode(delegate) }];
}

/**
 * The hash the account signs, as the EntryPoint computes it (it covers the chain id and itself;
 * on v0.8 it is an EIP-712 digest, and for an EIP-7702 operation it binds the delegate, which
 * `eip7702Delegate` provides when the delegation is not on chain yet).
 */
export function getUserOpHash(
  client: Reader,
  entryPoint: Address,
  userOp: PackedUserOperation,
  options: { eip7702Delegate?: Address } = {},
): Promise<Hex> {
  return client.readContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "getUserOpHash",
    args: [userOp],
    stateOverride: options.eip7702Delegate
      ? delegationOverride(userOp.sender, options.eip7702Delegate)
      : undefined,
  });
}

/**
 * How the account signs the userOpHash. SimpleAccount 0.7 recovers its owner from
 * toEthSignedMessageHash(userOpHash) (an EIP-191 personal signature over the hash's 32 bytes);
 * v0.8's SimpleAccount and Simple7702Account recover from the userOpHash itself, which v0.8 makes
 * an EIP-712 digest.
 */
export type UserOpSignatureScheme = "personal" | "raw";

export async function signUserOp(
  client: Reader,
  entryPoint: Address,
  owner: LocalAccount,
  userOp: PackedUserOperation,
  options: { scheme?: UserOpSignatureScheme; eip7702Delegate?: Address } = {},
): Promise<{ userOp: PackedUserOperation; userOpHash: Hex }> {
  const userOpHash = await getUserOpHash(client, entryPoint, userOp, options);
  if (options.scheme === "raw" && !owner.sign) throw new Error("this account cannot sign a raw hash");
  const signature =
    options.scheme === "raw"
      ? await owner.sign!({ hash: userOpHash })
      : await owner.signMessage({ message: { raw: userOpHash } });
  return { userOp: { ...userOp, signature }, userOpHash };
}

/**
 * The EOA's EIP-7702 authorization to run `delegate`'s code, for its current nonce: the bundle
 * transaction carries it (a bundler sends it, so the EOA's own nonce is not bumped first).
 */
export async function signDelegation(
  client: Pick<PublicClient, "getTransactionCount" | "getChainId">,
  eoa: LocalAccount,
  delegate: Address,
): Promise<SignedAuthorization> {
  if (!eoa.signAuthorization) throw new Error("this account cannot sign an EIP-7702 authorization");
  const [nonce, chainId] = await Promise.all([
    client.getTransactionCount({ address: eoa.address, blockTag: "pending" }),
    client.getChainId(),
  ]);
  return eoa.signAuthorization({ address: delegate, chainId, nonce });
}

export interface HandleOpsOptions {
  /** Who receives the gas refund; the bundler itself by default. */
  beneficiary?: Address;
  /**
   * A fixed transaction gas limit. Without it viem estimates first, and a refused operation
   * throws before anything is sent; with it the transaction is mined and reverts on chain.
   */
  gas?: bigint;
  /** EIP-7702 authorizations the bundle transaction carries (an EIP-7702 operation's eip7702Auth). */
  authorizationList?: SignedAuthorization[];
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
    authorizationList: options.authorizationList,
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
  options: { stateOverride?: StateOverride } = {},
): Promise<FailedOp | undefined> {
  try {
    await client.simulateContract({
      account: bundler,
      address: entryPoint,
      abi: entryPoint07Abi,
      functionName: "handleOps",
      args: [userOps, bundler],
      stateOverride: options.stateOverride,
    });
    return undefined;
  } catch (err) {
    const failed = failedOpOf(err);
    if (failed) return failed;
    throw err;
  }
}
