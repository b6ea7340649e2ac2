/**
 * Test-side helpers for sponsored user operations. The account and bundler mechanics live in
 * ./chain/userop.ts (shared with the demo); this file adds a stand-in for the service: it signs
 * a version 3 authorization (a call authorization, mode 0, or a whole-operation authorization,
 * mode 1) with a local key and assembles a complete, signed operation.
 *
 * The signature is made with viem's signTypedData from the typed-data description, not from the
 * service's hand-encoded digest, so a chain test that passes also cross-checks that encoding.
 *
 * The same helper serves both EntryPoints: pass `stack` (v0.7) or `stack.v08` (v0.8), and for an
 * EIP-7702 operation on v0.8 an `eip7702` EOA instead of an owner or a sender.
 */
import { type Address, type Hex, type LocalAccount, numberToHex, slice } from "viem";
import type { PackedUserOperation } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import {
  type AuthorizationTerms,
  type CallAuthorization,
  callSponsorshipTypedData,
  operationSponsorshipTypedData,
  type PaymasterDomain,
  type SponsoredOperation,
} from "../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS, type PaymasterGasLimits } from "../../src/paymaster/gas.ts";
import {
  decodePaymasterAndData,
  encodeCallPaymasterAndData,
  encodeOperationPaymasterAndData,
  type PaymasterAndData,
  type PaymasterMode,
  ZERO_HASH,
} from "../../src/paymaster/layout.ts";
import type { DevChain } from "./chain/anvil.ts";
import type { DevnetStack, DevnetStackV08 } from "./chain/devnet.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  getAccountNonce,
  getUserOpHash,
  signDelegation,
  signUserOp,
  totalGasLimit,
  type UserOpGas,
} from "./chain/userop.ts";

export * from "./chain/userop.ts";

export function randomAccount(): LocalAccount {
  return privateKeyToAccount(generatePrivateKey());
}

export function randomAuthId(): Hex {
  return numberToHex(BigInt(generatePrivateKey()), { size: 32 });
}

/**
 * Delegates `eoa` to `delegate` on chain now: wallet 0 sends an EIP-7702 transaction carrying the
 * EOA's authorization (to the EOA itself, with no data, which Simple7702Account's receive accepts).
 */
export async function delegateEoa(chain: DevChain, eoa: LocalAccount, delegate: Address): Promise<void> {
  const authorization = await signDelegation(chain.publicClient, eoa, delegate);
  const hash = await chain.wallets[0]!.sendTransaction({
    to: eoa.address,
    authorizationList: [authorization],
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`delegation of ${eoa.address} reverted`);
}

export async function latestTimestampSec(chain: Pick<DevChain, "publicClient">): Promise<number> {
  const block = await chain.publicClient.getBlock({ blockTag: "latest" });
  return Number(block.timestamp);
}

/** The service's signature over a call authorization (mode 0). */
export function signCallAuthorization(
  signer: LocalAccount,
  domain: PaymasterDomain,
  gas: PaymasterGasLimits,
  auth: CallAuthorization,
): Promise<Hex> {
  return signer.signTypedData(callSponsorshipTypedData(domain, gas, auth));
}

/** The service's signature over a whole-operation authorization (mode 1). */
export function signOperationAuthorization(
  signer: LocalAccount,
  domain: PaymasterDomain,
  gas: PaymasterGasLimits,
  userOp: SponsoredOperation,
  terms: AuthorizationTerms,
): Promise<Hex> {
  return signer.signTypedData(operationSponsorshipTypedData(domain, gas, userOp, terms));
}

/** Where an operation goes: the v0.7 stack, or its `v08` half. */
export type SponsorStack = Pick<DevnetStack, "entryPoint" | "paymaster" | "accountFactory"> & {
  entryPointVersion?: DevnetStackV08["entryPointVersion"];
};

/** An EOA that sends its own operation through EIP-7702 (EntryPoint v0.8 only). */
export interface Eip7702Sender {
  /** The EOA's key: it is the sender, and Simple7702Account checks its signature. */
  account: LocalAccount;
  /** The implementation its code delegates to when the operation runs. */
  delegate: Address;
  /** The marker in initCode; `0x7702` (viem's spelling) by default, `0x` once delegated if wished. */
  initCode?: Hex;
}

export interface SponsoredOpParams {
  chain: DevChain;
  stack: SponsorStack;
  /** The paymaster signer (the service's key). */
  signer: LocalAccount;
  target: Address;
  data: Hex;
  /** The operation's callData; by default SimpleAccount `execute(target, 0, data)`. */
  callData?: Hex;
  /** Owner key of the SimpleAccount that sends the operation (one of owner or sender). */
  owner?: LocalAccount;
  /** An already deployed account that accepts any signature, such as an AdversarialAccount. */
  sender?: Address;
  /** An EIP-7702 EOA (v0.8): sender, signer and delegate in one. */
  eip7702?: Eip7702Sender;
  /** "call" (mode 0, the default) or "operation" (mode 1). */
  mode?: PaymasterMode;
  /** What to sign differently from what the operation does (refusal tests); mode 1 reads only the terms. */
  authorization?: Partial<CallAuthorization>;
  domain?: Partial<PaymasterDomain>;
  gas?: UserOpGas;
  /** The paymaster's limits put in paymasterAndData; PAYMASTER_GAS_LIMITS by default. */
  paymasterGas?: PaymasterGasLimits;
  /** The paymaster's limits the authorization signs; paymasterGas by default. */
  signedPaymasterGas?: PaymasterGasLimits;
  /** Changes the operation after the paymaster signed it and before the account signs it. */
  tamper?: (userOp: PackedUserOperation) => PackedUserOperation;
}

export interface SponsoredOp {
  userOp: PackedUserOperation;
  userOpHash: Hex;
  sender: Address;
  mode: PaymasterMode;
  authId: Hex;
  /** The call authorization as signed (mode 0 only). */
  authorization?: CallAuthorization;
  /** paymasterAndData as the contract will read it; null when `tamper` made it malformed. */
  paymasterData: PaymasterAndData | null;
}

/**
 * A fully signed operation calling `target` with `data` through `execute`, sponsored by an
 * authorization that (unless overridden) matches it exactly: a 5-minute window from the latest
 * block, and in mode 0 ceilings equal to the operation's own gas total and fees.
 */
export async function sponsoredUserOp(p: SponsoredOpParams): Promise<SponsoredOp> {
  const { publicClient } = p.chain;
  const gas = p.gas ?? devnetUserOpGas;
  const paymasterGas = p.paymasterGas ?? PAYMASTER_GAS_LIMITS;
  const signedGas = p.signedPaymasterGas ?? paymasterGas;
  const mode = p.mode ?? "call";
  const { sender, initCode } = await senderOf(p);
  const nowSec = await latestTimestampSec(p.chain);
  const domain: PaymasterDomain = { chainId: p.chain.chainId, paymaster: p.stack.paymaster, ...p.domain };
  // The paymaster address always names the real paymaster, whatever domain was signed.
  const realDomain: PaymasterDomain = { chainId: p.chain.chainId, paymaster: p.stack.paymaster };

  const unsigned = buildUserOp({
    sender,
    nonce: await getAccountNonce(publicClient, p.stack.entryPoint, sender),
    initCode,
    callData: p.callData ?? executeCallData(p.target, p.data),
    gas,
  });
  const authorization: CallAuthorization = {
    sender,
    // Unbound by default; the code-binding tests sign the sender's EXTCODEHASH.
    senderCodeHash: ZERO_HASH,
    initCode: unsigned.initCode,
    target: p.target,
    selector: slice(p.data, 0, 4),
    maxTotalGas: totalGasLimit(gas, paymasterGas),
    maxPreVerificationGas: gas.preVerificationGas,
    maxFeePerGasWei: gas.maxFeePerGas,
    maxPriorityFeePerGasWei: gas.maxPriorityFeePerGas,
    // EntryPoint v0.8 wants block.timestamp > validAfter (v0.7: >=), and the next block may share
    // the latest one's second.
    validAfterSec: p.stack.entryPointVersion === "0.8" ? nowSec - 1 : nowSec,
    validUntilSec: nowSec + 300,
    authId: randomAuthId(),
    ...p.authorization,
  };

  const eip7702Delegate = p.eip7702?.delegate;
  let paymasterAndData: Hex;
  if (mode === "call") {
    const signature = await signCallAuthorization(p.signer, domain, signedGas, authorization);
    paymasterAndData = encodeCallPaymasterAndData(realDomain, paymasterGas, authorization, signature);
  } else {
    const operation = { ...unsigned, eip7702Delegate };
    const signature = await signOperationAuthorization(p.signer, domain, signedGas, operation, authorization);
    paymasterAndData = encodeOperationPaymasterAndData(realDomain, paymasterGas, authorization, signature);
  }

  const withPaymaster = (p.tamper ?? ((op) => op))({ ...unsigned, paymasterAndData });
  // v0.7's SimpleAccount signs the hash as a personal message; v0.8's accounts sign it raw.
  const scheme = p.stack.entryPointVersion === "0.8" ? "raw" : "personal";
  const accountKey = p.eip7702?.account ?? p.owner;
  const { userOp, userOpHash } = accountKey
    ? await signUserOp(publicClient, p.stack.entryPoint, accountKey, withPaymaster, {
        scheme,
        eip7702Delegate,
      })
    : {
        userOp: withPaymaster,
        userOpHash: await getUserOpHash(publicClient, p.stack.entryPoint, withPaymaster),
      };
  return {
    userOp,
    userOpHash,
    sender,
    mode,
    authId: authorization.authId,
    authorization: mode === "call" ? authorization : undefined,
    paymasterData: decodePaymasterAndData(userOp.paymasterAndData),
  };
}

/**
 * The sender, and its initCode: the factory call that deploys a SimpleAccount not deployed yet,
 * or an EIP-7702 EOA's marker.
 */
async function senderOf(p: SponsoredOpParams): Promise<{ sender: Address; initCode?: Hex }> {
  if (p.sender) return { sender: p.sender };
  if (p.eip7702) {
    if (p.stack.entryPointVersion !== "0.8") throw new Error("EIP-7702 operations need EntryPoint v0.8");
    return { sender: p.eip7702.account.address, initCode: p.eip7702.initCode ?? "0x7702" };
  }
  if (!p.owner) throw new Error("sponsoredUserOp needs an owner (SimpleAccount), a sender or an eip7702 EOA");
  const { publicClient } = p.chain;
  const sender = await getAccountAddress(publicClient, p.stack.accountFactory, p.owner.address);
  const deployed = (await publicClient.getCode({ address: sender })) !== undefined;
  return {
    sender,
    initCode: deployed ? undefined : accountInitCode(p.stack.accountFactory, p.owner.address),
  };
}
