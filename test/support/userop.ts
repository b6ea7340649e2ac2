/**
 * Test-side helpers for sponsored user operations. The account and bundler mechanics live in
 * ./chain/userop.ts (shared with the demo); this file adds a stand-in for the service: it signs
 * a version 2 authorization (a call authorization, mode 0, or a whole-operation authorization,
 * mode 1) with a local key and assembles a complete, signed operation.
 *
 * The signature is made with viem's signTypedData from the typed-data description, not from the
 * service's hand-encoded digest, so a chain test that passes also cross-checks that encoding.
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
} from "../../src/paymaster/layout.ts";
import type { DevChain } from "./chain/anvil.ts";
import type { DevnetStack } from "./chain/devnet.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  getAccountNonce,
  getUserOpHash,
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

export interface SponsoredOpParams {
  chain: DevChain;
  stack: DevnetStack;
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
    target: p.target,
    selector: slice(p.data, 0, 4),
    maxTotalGas: totalGasLimit(gas, paymasterGas),
    maxFeePerGasWei: gas.maxFeePerGas,
    maxPriorityFeePerGasWei: gas.maxPriorityFeePerGas,
    validAfterSec: nowSec,
    validUntilSec: nowSec + 300,
    authId: randomAuthId(),
    ...p.authorization,
  };

  let paymasterAndData: Hex;
  if (mode === "call") {
    const signature = await signCallAuthorization(p.signer, domain, signedGas, authorization);
    paymasterAndData = encodeCallPaymasterAndData(realDomain, paymasterGas, authorization, signature);
  } else {
    const signature = await signOperationAuthorization(p.signer, domain, signedGas, unsigned, authorization);
    paymasterAndData = encodeOperationPaymasterAndData(realDomain, paymasterGas, authorization, signature);
  }

  const withPaymaster = (p.tamper ?? ((op) => op))({ ...unsigned, paymasterAndData });
  const { userOp, userOpHash } = p.owner
    ? await signUserOp(publicClient, p.stack.entryPoint, p.owner, withPaymaster)
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

/** The sender, and the initCode that deploys it when it is a SimpleAccount not deployed yet. */
async function senderOf(p: SponsoredOpParams): Promise<{ sender: Address; initCode?: Hex }> {
  if (p.sender) return { sender: p.sender };
  if (!p.owner) throw new Error("sponsoredUserOp needs an owner (SimpleAccount) or a sender");
  const { publicClient } = p.chain;
  const sender = await getAccountAddress(publicClient, p.stack.accountFactory, p.owner.address);
  const deployed = (await publicClient.getCode({ address: sender })) !== undefined;
  return {
    sender,
    initCode: deployed ? undefined : accountInitCode(p.stack.accountFactory, p.owner.address),
  };
}
