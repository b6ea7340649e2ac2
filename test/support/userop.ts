/**
 * Test-side helpers for sponsored user operations. The account and bundler mechanics live in
 * ./chain/userop.ts (shared with the demo); this file adds a stand-in for the service: it
 * signs the Sponsorship with a local key and assembles a complete, signed operation.
 */
import { type Address, type Hex, type LocalAccount, numberToHex, slice } from "viem";
import type { PackedUserOperation } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import {
  encodePaymasterAndData,
  type PaymasterDomain,
  type PaymasterGasLimits,
  type Sponsorship,
  sponsorshipTypedData,
} from "../../src/sponsor/paymaster-data.ts";
import type { DevChain } from "./chain/anvil.ts";
import { type DevnetStack, SPONSOR_PAYMASTER_GAS_LIMITS } from "./chain/devnet.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  getAccountNonce,
  requiredPrefundWei,
  signUserOp,
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

export interface SponsoredOpParams {
  chain: DevChain;
  stack: DevnetStack;
  /** Owner key of the SimpleAccount that sends the operation. */
  owner: LocalAccount;
  /** The paymaster signer (the service's key). */
  signer: LocalAccount;
  target: Address;
  data: Hex;
  /** Fields to sign differently from what the operation does (refusal tests). */
  sponsorship?: Partial<Sponsorship>;
  domain?: Partial<PaymasterDomain>;
  gas?: UserOpGas;
  paymasterGas?: PaymasterGasLimits;
}

export interface SponsoredOp {
  userOp: PackedUserOperation;
  userOpHash: Hex;
  sponsorship: Sponsorship;
  sender: Address;
}

/**
 * A fully signed operation from `owner`'s account calling `target` with `data`, sponsored by
 * an authorization that (unless overridden) matches it exactly, with a 5-minute window that
 * starts at the latest block and maxGasCost equal to the EntryPoint's prefund.
 */
export async function sponsoredUserOp(p: SponsoredOpParams): Promise<SponsoredOp> {
  const { publicClient } = p.chain;
  const gas = p.gas ?? devnetUserOpGas;
  const paymasterGas = p.paymasterGas ?? SPONSOR_PAYMASTER_GAS_LIMITS;
  const sender = await getAccountAddress(publicClient, p.stack.accountFactory, p.owner.address);
  const deployed = (await publicClient.getCode({ address: sender })) !== undefined;
  const nowSec = await latestTimestampSec(p.chain);

  const sponsorship: Sponsorship = {
    sender,
    target: p.target,
    selector: slice(p.data, 0, 4),
    maxGasCostWei: requiredPrefundWei(gas, paymasterGas),
    validAfterSec: nowSec,
    validUntilSec: nowSec + 300,
    authId: randomAuthId(),
    ...p.sponsorship,
  };
  const domain: PaymasterDomain = { chainId: p.chain.chainId, paymaster: p.stack.paymaster, ...p.domain };
  const paymasterSignature = await p.signer.signTypedData(sponsorshipTypedData(domain, sponsorship));
  // The paymaster address always names the real paymaster, whatever domain was signed.
  const paymasterAndData = encodePaymasterAndData(
    { chainId: p.chain.chainId, paymaster: p.stack.paymaster },
    paymasterGas,
    sponsorship,
    paymasterSignature,
  );
  const unsigned = buildUserOp({
    sender,
    nonce: await getAccountNonce(publicClient, p.stack.entryPoint, sender),
    initCode: deployed ? undefined : accountInitCode(p.stack.accountFactory, p.owner.address),
    callData: executeCallData(p.target, p.data),
    gas,
    paymasterAndData,
  });
  const { userOp, userOpHash } = await signUserOp(publicClient, p.stack.entryPoint, p.owner, unsigned);
  return { userOp, userOpHash, sponsorship, sender };
}
