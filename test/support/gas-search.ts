/**
 * Finds gas limits by asking the EntryPoint itself: a binary search over one limit, each probe a
 * freshly signed operation. Used to measure the paymaster's verification gas (the figure behind
 * src/paymaster/gas.ts) and to find the tight limits that drive the prefund-too-low path.
 */
import { type Address, type Hex, parseEventLogs } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import type { PaymasterGasLimits } from "../../src/paymaster/gas.ts";
import type { DevChain } from "./chain/anvil.ts";
import type { DevnetStack } from "./chain/devnet.ts";
import {
  getAccountNonce,
  handleOps,
  type SponsoredOpParams,
  simulateHandleOps,
  sponsoredUserOp,
  type UserOpGas,
} from "./userop.ts";

/**
 * The smallest value in [low, high] for which `accepts` holds, given that it holds at `high` and
 * that once it holds it keeps holding for every larger value.
 */
export async function smallestAccepted(
  low: bigint,
  high: bigint,
  accepts: (value: bigint) => Promise<boolean>,
): Promise<bigint> {
  if (!(await accepts(high))) throw new Error(`not accepted even at ${high}`);
  let lo = low;
  let hi = high;
  while (lo < hi) {
    const mid = (lo + hi) / 2n;
    if (await accepts(mid)) hi = mid;
    else lo = mid + 1n;
  }
  return hi;
}

export interface MeasureParams extends Omit<SponsoredOpParams, "paymasterGas" | "signedPaymasterGas"> {
  chain: DevChain;
  stack: DevnetStack;
  postOpGasLimit?: bigint;
}

/**
 * The smallest paymasterVerificationGasLimit the EntryPoint accepts for this operation, as the
 * EntryPoint counts it (the paymaster's own execution plus the EntryPoint encoding the operation
 * for the call). Every probe signs a new authorization id, so the single-use write is always the
 * cold zero-to-non-zero one a real operation pays for. Probes are eth_calls: nothing is mined.
 */
export async function measurePaymasterVerificationGas(p: MeasureParams): Promise<bigint> {
  const bundler = p.chain.wallets[1]!.account.address;
  return smallestAccepted(1_000n, 1_000_000n, async (verificationGasLimit) => {
    const paymasterGas: PaymasterGasLimits = { verificationGasLimit, postOpGasLimit: p.postOpGasLimit ?? 0n };
    const op = await sponsoredUserOp({ ...p, paymasterGas });
    const failed = await simulateHandleOps(p.chain.publicClient, bundler, p.stack.entryPoint, [op.userOp]);
    return failed === undefined;
  });
}

export interface PrefundTooLowParams extends Omit<SponsoredOpParams, "gas" | "owner"> {
  /** An AdversarialAccount whose `execute` ends in a revert with a large revert data. */
  sender: Address;
  /** Fees and preVerificationGas of the operation; its two account limits are searched. */
  gas: UserOpGas;
}

/**
 * Account gas limits tight enough that an AdversarialAccount's large revert data pushes the
 * operation's charge above its prefund, so the EntryPoint takes its prefund-too-low path:
 * the smallest verificationGasLimit it accepts, and the smallest callGasLimit with which the
 * account's call runs to its own revert (one gas less and it runs out of gas instead, and the
 * EntryPoint has no revert data to log). The caller's fees should be equal
 * (maxFeePerGas = maxPriorityFeePerGas): then the EntryPoint charges exactly maxFeePerGas per gas,
 * the same price the prefund is computed at. Each callGasLimit probe is mined inside an anvil
 * snapshot and rolled back, because only the receipt's logs tell the two outcomes apart.
 */
export async function prefundTooLowGas(p: PrefundTooLowParams): Promise<UserOpGas> {
  const { chain, stack } = p;
  const bundler = chain.wallets[1]!;
  const verificationGasLimit = await smallestAccepted(1_000n, 1_000_000n, async (limit) => {
    const op = await sponsoredUserOp({ ...p, gas: { ...p.gas, verificationGasLimit: limit } });
    return (
      (await simulateHandleOps(chain.publicClient, bundler.account.address, stack.entryPoint, [
        op.userOp,
      ])) === undefined
    );
  });
  const sender = p.sender;
  const nonceBefore = await getAccountNonce(chain.publicClient, stack.entryPoint, sender);
  const callGasLimit = await smallestAccepted(1_000n, 1_000_000n, (limit) =>
    rolledBack(chain, async () => {
      const gas = { ...p.gas, verificationGasLimit, callGasLimit: limit };
      const op = await sponsoredUserOp({ ...p, gas });
      const { logs } = await handleOps(chain.publicClient, bundler, stack.entryPoint, [op.userOp]);
      const reverted = parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationRevertReason" });
      const tooLow = parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationPrefundTooLow" });
      return tooLow.length > 0 || reverted.some((log) => log.args.revertReason !== "0x");
    }),
  );
  const nonceAfter = await getAccountNonce(chain.publicClient, stack.entryPoint, sender);
  if (nonceAfter !== nonceBefore) {
    throw new Error(`the probes left ${sender}'s nonce at ${nonceAfter}, not ${nonceBefore}`);
  }
  return { ...p.gas, verificationGasLimit, callGasLimit };
}

/**
 * Runs `probe` inside an anvil snapshot and reverts to it, whether the probe returned or threw.
 * viem's revert drops anvil's answer; a revert that did not happen would leave a probe's operation
 * applied (the account's nonce used), and the caller's operation would fail later with AA25 and
 * no word of why, so the answer is checked here.
 *
 * anvil hands out a mined transaction's receipt before its pool has let go of the transaction.
 * Reverting in that gap left the probe's transaction pending again (seen in about 1 run in 20 of
 * three files at once): the next probe's gas estimate, made against the pending block, then saw
 * the account's nonce already used and failed with AA25. So the pool is let to empty before the
 * revert, and anything a revert still leaves in it is dropped; both are checked.
 */
async function rolledBack<T>(chain: DevChain, probe: () => Promise<T>): Promise<T> {
  const snapshot = await chain.testClient.snapshot();
  const revert = async () => {
    await poolEmptied(chain);
    const reverted: unknown = await chain.testClient.request({ method: "evm_revert", params: [snapshot] });
    if (reverted !== true) throw new Error(`anvil did not revert to snapshot ${snapshot}`);
    await chain.testClient.request({ method: "anvil_dropAllTransactions" as never, params: [] as never });
    await poolEmptied(chain);
  };
  let result: T;
  try {
    result = await probe();
  } catch (err) {
    await revert();
    throw err;
  }
  await revert();
  return result;
}

/** Waits until anvil's pool holds no transaction, pending or queued (at most 10 s). */
async function poolEmptied(chain: DevChain): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const status = (await chain.publicClient.request({ method: "txpool_status" as never } as never)) as {
      pending: Hex;
      queued: Hex;
    };
    if (BigInt(status.pending) === 0n && BigInt(status.queued) === 0n) return;
    if (attempt === 1_000) {
      throw new Error(`anvil's pool still holds transactions: ${JSON.stringify(status)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
