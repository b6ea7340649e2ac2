/**
 * Reads what our paymaster paid over a range of blocks, from the EntryPoint's own logs.
 *
 * `UserOperationEvent(paymaster = ours)` is the charge: the EntryPoint emits it for every
 * operation it ran, whatever contract called handleOps or handleAggregatedOps, and its
 * `actualGasCost` is exactly what left the paymaster's deposit (also on the prefund-too-low path,
 * where it is the whole prefund). `SponsorshipUsed(authId, userOpHash, sender)` is emitted by the
 * paymaster during validation, so it survives an inner revert, the prefund-too-low path and a
 * reverted postOp; it names the authorization. The two are joined on (transaction, userOpHash).
 */
import { type Address, getAbiItem, type Hex } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import type { ChainClient } from "../chains/rpc.ts";
import { sponsorPaymasterAbi } from "../paymaster/abi.ts";

const userOperationEvent = getAbiItem({ abi: entryPoint07Abi, name: "UserOperationEvent" });
const prefundTooLowEvent = getAbiItem({ abi: entryPoint07Abi, name: "UserOperationPrefundTooLow" });
const sponsorshipUsedEvent = getAbiItem({ abi: sponsorPaymasterAbi, name: "SponsorshipUsed" });

/** One operation the EntryPoint charged to our paymaster, with the authorization it used if known. */
export interface ChainOperation {
  blockHash: Hex;
  blockNumber: bigint;
  logIndex: number;
  txHash: Hex;
  userOpHash: Hex;
  sender: Address;
  success: boolean;
  prefundTooLow: boolean;
  actualGasCostWei: bigint;
  actualGasUsed: bigint;
  /** From SponsorshipUsed in the same transaction; null when there was none. */
  authId: Hex | null;
}

export interface ScanTarget {
  client: ChainClient;
  entryPoint: Address;
  paymaster: Address;
}

export async function scanPaidOperations(
  target: ScanTarget,
  fromBlock: bigint,
  toBlock: bigint,
): Promise<ChainOperation[]> {
  const { client, entryPoint, paymaster } = target;
  const [opLogs, usedLogs, lowLogs] = await Promise.all([
    client.getLogs({
      address: entryPoint,
      event: userOperationEvent,
      args: { paymaster },
      fromBlock,
      toBlock,
      strict: true,
    }),
    client.getLogs({ address: paymaster, event: sponsorshipUsedEvent, fromBlock, toBlock, strict: true }),
    client.getLogs({ address: entryPoint, event: prefundTooLowEvent, fromBlock, toBlock, strict: true }),
  ]);
  const authIds = new Map(usedLogs.map((l) => [key(l.transactionHash, l.args.userOpHash), l.args.authId]));
  const prefundTooLow = new Set(lowLogs.map((l) => key(l.transactionHash, l.args.userOpHash)));
  return opLogs.map((l) => {
    const k = key(l.transactionHash, l.args.userOpHash);
    return {
      blockHash: l.blockHash,
      blockNumber: l.blockNumber,
      logIndex: l.logIndex,
      txHash: l.transactionHash,
      userOpHash: l.args.userOpHash,
      sender: l.args.sender,
      success: l.args.success,
      prefundTooLow: prefundTooLow.has(k),
      actualGasCostWei: l.args.actualGasCost,
      actualGasUsed: l.args.actualGasUsed,
      authId: authIds.get(k) ?? null,
    };
  });
}

function key(txHash: Hex, userOpHash: Hex): string {
  return `${txHash.toLowerCase()}:${userOpHash.toLowerCase()}`;
}
