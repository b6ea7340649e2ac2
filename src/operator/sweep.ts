/**
 * Moving what studios sent to their funding addresses into the paymaster's EntryPoint deposit,
 * without the service ever holding a key that can spend them.
 *
 * 1. `sweep-plan` (online, no key): derives the funding addresses from the xpub exactly as the
 *    service does (src/funding/derivation.ts, m/44'/60'/0'/0/i), reads each balance and nonce, and
 *    writes one unsigned EIP-1559 transaction per address holding more than a transfer's gas cost:
 *    EntryPoint.depositTo(paymaster) carrying balance − gas × maxFeePerGas.
 * 2. `sweep-sign` (offline, SWEEP_XPRV): whoever holds the account-level extended private key
 *    checks that every transaction pays the paymaster named on the command line and signs it.
 * 3. `sweep-send` (online, no key): broadcasts the signed transactions and reports the deposit.
 *
 * What is left at an address is gas × maxFeePerGas − gasUsed × effectiveGasPrice: less than one
 * transfer's gas cost, so the next plan skips it until more arrives.
 */
import { HDKey } from "@scure/bip32";
import {
  type Address,
  bytesToHex,
  encodeFunctionData,
  getAddress,
  type Hex,
  isAddress,
  isHex,
  keccak256,
  parseTransaction,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ACCOUNT_PATH, depositDeriver } from "../funding/derivation.ts";
import { type Clients, type Io, OperatorError, requirePaymaster } from "./context.ts";
import { stakeManagerAbi } from "./paymaster-commands.ts";
import { explain, waitFor } from "./send.ts";

export const SWEEP_KEY_VARIABLE = "SWEEP_XPRV";
export const PLAN_KIND = "sponsor-paymaster-sweep-plan";
export const SIGNED_KIND = "sponsor-paymaster-sweep-signed";
/** One plan covers at most this many addresses (one RPC round trip or two each). */
export const MAX_SWEEP_COUNT = 1000;
const READ_BATCH = 20;

/** An unsigned transaction as JSON: integers as decimal strings, except the nonce and chain id. */
export interface SweepTransaction {
  index: number;
  path: string;
  type: "eip1559";
  chainId: number;
  from: Address;
  to: Address;
  data: Hex;
  value: string;
  nonce: number;
  gas: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
}

export interface SweepPlan {
  kind: typeof PLAN_KIND;
  chainId: number;
  entryPoint: Address;
  paymaster: Address;
  xpub: string;
  fromIndex: number;
  count: number;
  gas: string;
  maxFeePerGas: string;
  maxPriorityFeePerGas: string;
  /** gas × maxFeePerGas: what an address must hold more than to be swept. */
  gasCostWei: string;
  addresses: { index: number; path: string; address: Address; balance: string; swept: string }[];
  transactions: SweepTransaction[];
  totalValue: string;
}

export interface SignedSweep {
  kind: typeof SIGNED_KIND;
  chainId: number;
  entryPoint: Address;
  paymaster: Address;
  totalValue: string;
  transactions: { index: number; from: Address; nonce: number; value: string; hash: Hex; raw: Hex }[];
}

export interface Fees {
  maxFeePerGasWei: bigint;
  maxPriorityFeePerGasWei: bigint;
}

export function depositCallData(paymaster: Address): Hex {
  return encodeFunctionData({ abi: stakeManagerAbi, functionName: "depositTo", args: [paymaster] });
}

export function derivationPath(index: number): string {
  return `${ACCOUNT_PATH}/0/${index}`;
}

/**
 * The transfer that empties an address into the deposit, or null when its balance does not cover
 * more than the gas: pure, so the arithmetic is tested without a chain.
 */
export function sweepTransaction(p: {
  chainId: number;
  index: number;
  from: Address;
  balanceWei: bigint;
  nonce: number;
  entryPoint: Address;
  paymaster: Address;
  gas: bigint;
  fees: Fees;
}): SweepTransaction | null {
  const gasCost = p.gas * p.fees.maxFeePerGasWei;
  if (p.balanceWei <= gasCost) return null;
  return {
    index: p.index,
    path: derivationPath(p.index),
    type: "eip1559",
    chainId: p.chainId,
    from: p.from,
    to: p.entryPoint,
    data: depositCallData(p.paymaster),
    value: (p.balanceWei - gasCost).toString(),
    nonce: p.nonce,
    gas: p.gas.toString(),
    maxFeePerGas: p.fees.maxFeePerGasWei.toString(),
    maxPriorityFeePerGas: p.fees.maxPriorityFeePerGasWei.toString(),
  };
}

export interface PlanOptions {
  xpub: string;
  fromIndex: number;
  count: number;
  maxFeePerGasWei?: bigint;
  maxPriorityFeePerGasWei?: bigint;
}

export async function planSweep(c: Clients, o: PlanOptions, io: Io): Promise<SweepPlan> {
  const { target, publicClient } = c;
  const paymaster = requirePaymaster(target);
  const deriver = xpubDeriver(o.xpub);
  const indexes = Array.from({ length: o.count }, (_, i) => o.fromIndex + i);
  const addresses = indexes.map((index) => ({ index, address: deriver.addressAt(index) }));
  // A few addresses at a time: a public RPC rate-limits a thousand requests at once.
  const state: { balanceWei: bigint; nonce: number }[] = [];
  for (let i = 0; i < addresses.length; i += READ_BATCH) {
    const batch = addresses.slice(i, i + READ_BATCH);
    state.push(
      ...(await Promise.all(
        batch.map(async ({ address }) => ({
          balanceWei: await publicClient.getBalance({ address, blockTag: "latest" }),
          nonce: await publicClient.getTransactionCount({ address, blockTag: "latest" }),
        })),
      )),
    );
  }
  const fees = await sweepFees(c, o, io);
  // Estimated from the richest address: a node may refuse to estimate for one that holds dust.
  const richest = state.reduce((best, s, i) => (s.balanceWei > state[best]!.balanceWei ? i : best), 0);
  const funded = state[richest]!.balanceWei > 0n ? addresses[richest] : undefined;
  const gas = funded ? await sweepGas(c, funded.address, paymaster) : 0n;

  const transactions: SweepTransaction[] = [];
  const rows = addresses.map(({ index, address }, i) => {
    const { balanceWei, nonce } = state[i]!;
    const tx = funded
      ? sweepTransaction({
          chainId: target.chainId,
          index,
          from: address,
          balanceWei,
          nonce,
          entryPoint: target.entryPoint,
          paymaster,
          gas,
          fees,
        })
      : null;
    if (tx) transactions.push(tx);
    return {
      index,
      path: derivationPath(index),
      address,
      balance: balanceWei.toString(),
      swept: tx?.value ?? "0",
    };
  });
  return {
    kind: PLAN_KIND,
    chainId: target.chainId,
    entryPoint: target.entryPoint,
    paymaster,
    xpub: o.xpub,
    fromIndex: o.fromIndex,
    count: o.count,
    gas: gas.toString(),
    maxFeePerGas: fees.maxFeePerGasWei.toString(),
    maxPriorityFeePerGas: fees.maxPriorityFeePerGasWei.toString(),
    gasCostWei: (gas * fees.maxFeePerGasWei).toString(),
    addresses: rows,
    transactions,
    totalValue: transactions.reduce((sum, tx) => sum + BigInt(tx.value), 0n).toString(),
  };
}

function xpubDeriver(xpub: string) {
  if (/^[xt]prv/.test(xpub)) {
    throw new OperatorError(
      "--xpub holds a private key: the plan needs only the public key (and keys never go on a command line)",
    );
  }
  try {
    return depositDeriver(xpub);
  } catch {
    throw new OperatorError("--xpub is not an extended public key");
  }
}

/**
 * Fees unless given: twice the latest base fee plus the node's priority fee, so the transfers
 * still go through after a few blocks of rising fees. The cap is what each transfer reserves;
 * whatever the chain does not charge stays at the address.
 */
async function sweepFees(c: Clients, o: PlanOptions, io: Io): Promise<Fees> {
  const block = await c.publicClient.getBlock({ blockTag: "latest" });
  const baseFee = block.baseFeePerGas ?? 0n;
  const priority =
    o.maxPriorityFeePerGasWei ?? BigInt(await c.publicClient.request({ method: "eth_maxPriorityFeePerGas" }));
  const maxFee = o.maxFeePerGasWei ?? baseFee * 2n + priority;
  if (maxFee === 0n) throw new OperatorError("--fee-per-gas must be more than 0");
  if (maxFee < baseFee)
    io.err(
      `warning: --fee-per-gas ${maxFee} is below the base fee ${baseFee}: the transfers wait until it falls`,
    );
  return { maxFeePerGasWei: maxFee, maxPriorityFeePerGasWei: priority < maxFee ? priority : maxFee };
}

/**
 * Every transfer is the same call from a plain account, so one estimate serves all; 10% on top
 * covers an RPC whose estimate runs tight. It is taken with the current deposit; a first deposit
 * into an empty one (a zero-to-non-zero write) is the dearest case, so later ones cost no more.
 */
async function sweepGas(c: Clients, from: Address, paymaster: Address): Promise<bigint> {
  const estimate = await c.publicClient.estimateGas({
    account: from,
    to: c.target.entryPoint,
    data: depositCallData(paymaster),
    value: 1n,
  });
  return estimate + estimate / 10n;
}

/**
 * Signs a plan offline with the account-level extended private key. Before signing anything it
 * checks that the key is the plan's (its xpub), that every transaction goes from the address the
 * key derives at its index, to the plan's EntryPoint, as depositTo(the paymaster the key holder
 * named), on the plan's chain: a tampered plan cannot send the funds anywhere else.
 */
export async function signSweep(
  plan: SweepPlan,
  xprv: string,
  expectedPaymaster: Address,
): Promise<SignedSweep> {
  checkPlanShape(plan);
  if (getAddress(plan.paymaster) !== getAddress(expectedPaymaster)) {
    throw new OperatorError(
      `the plan pays paymaster ${plan.paymaster}, not ${expectedPaymaster}: refusing to sign`,
    );
  }
  const account = accountKey(xprv);
  if (account.publicExtendedKey !== plan.xpub) {
    throw new OperatorError(`${SWEEP_KEY_VARIABLE} is not the private half of the plan's xpub`);
  }
  const external = account.deriveChild(0);
  const data = depositCallData(plan.paymaster);
  const transactions: SignedSweep["transactions"] = [];
  for (const tx of plan.transactions) {
    if (
      tx.chainId !== plan.chainId ||
      getAddress(tx.to) !== getAddress(plan.entryPoint) ||
      tx.data !== data
    ) {
      throw new OperatorError(
        `transaction ${tx.index} is not depositTo(${plan.paymaster}) on the plan's EntryPoint`,
      );
    }
    const child = external.deriveChild(tx.index);
    const signer = privateKeyToAccount(bytesToHex(child.privateKey!));
    if (signer.address !== getAddress(tx.from)) {
      throw new OperatorError(
        `transaction ${tx.index}: ${tx.from} is not the address at ${derivationPath(tx.index)}`,
      );
    }
    const raw = await signer.signTransaction({
      type: "eip1559",
      chainId: tx.chainId,
      nonce: tx.nonce,
      to: getAddress(tx.to),
      data: tx.data,
      value: BigInt(tx.value),
      gas: BigInt(tx.gas),
      maxFeePerGas: BigInt(tx.maxFeePerGas),
      maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
    });
    transactions.push({
      index: tx.index,
      from: signer.address,
      nonce: tx.nonce,
      value: tx.value,
      hash: keccak256(raw),
      raw,
    });
  }
  return {
    kind: SIGNED_KIND,
    chainId: plan.chainId,
    entryPoint: plan.entryPoint,
    paymaster: plan.paymaster,
    totalValue: transactions.reduce((sum, tx) => sum + BigInt(tx.value), 0n).toString(),
    transactions,
  };
}

function accountKey(xprv: string): HDKey {
  let key: HDKey;
  try {
    key = HDKey.fromExtendedKey(xprv.trim());
  } catch {
    // Never quote the value: it is the key that spends every funding address.
    throw new OperatorError(`${SWEEP_KEY_VARIABLE} is not an extended private key`);
  }
  if (!key.privateKey)
    throw new OperatorError(`${SWEEP_KEY_VARIABLE} holds a public key; signing needs the private one`);
  return key;
}

function checkPlanShape(plan: SweepPlan): void {
  const valid =
    plan?.kind === PLAN_KIND &&
    Number.isSafeInteger(plan.chainId) &&
    isAddress(plan.entryPoint) &&
    isAddress(plan.paymaster) &&
    typeof plan.xpub === "string" &&
    Array.isArray(plan.transactions) &&
    plan.transactions.every(
      (tx) =>
        Number.isSafeInteger(tx.index) &&
        tx.index >= 0 &&
        Number.isSafeInteger(tx.nonce) &&
        isAddress(tx.from) &&
        isAddress(tx.to) &&
        isHex(tx.data) &&
        [tx.value, tx.gas, tx.maxFeePerGas, tx.maxPriorityFeePerGas].every((v) => /^\d{1,78}$/.test(v)),
    );
  if (!valid) throw new OperatorError("the file is not a sweep plan made by sweep-plan");
}

/** Broadcasts signed transfers, waits for each, and reports the paymaster's deposit after. */
export async function sendSweep(c: Clients, signed: SignedSweep, io: Io): Promise<void> {
  if (signed?.kind !== SIGNED_KIND || !Array.isArray(signed.transactions)) {
    throw new OperatorError("the file is not the output of sweep-sign");
  }
  if (signed.chainId !== c.target.chainId) {
    throw new OperatorError(`the transfers are signed for chain ${signed.chainId}, not ${c.target.chainId}`);
  }
  const before = await depositOf(c, signed);
  const hashes: Hex[] = [];
  for (const tx of signed.transactions) {
    const parsed = parseTransaction(tx.raw);
    if (
      parsed.chainId !== c.target.chainId ||
      getAddress(parsed.to ?? "0x") !== getAddress(signed.entryPoint)
    ) {
      throw new OperatorError(`transaction ${tx.index} does not go to the EntryPoint ${signed.entryPoint}`);
    }
    try {
      hashes.push(await c.publicClient.sendRawTransaction({ serializedTransaction: tx.raw }));
    } catch (err) {
      const sent = hashes.length > 0 ? ` (${hashes.length} sent before it: ${hashes.join(", ")})` : "";
      throw explain(err, `sending the transfer from ${tx.from} (nonce ${tx.nonce})${sent}`, c);
    }
  }
  let failed = 0;
  for (const [i, hash] of hashes.entries()) {
    const tx = signed.transactions[i]!;
    try {
      await waitFor(c, `transfer from ${tx.from}`, hash);
      io.out(`swept ${tx.value} wei from ${tx.from} (tx ${hash})`);
    } catch (err) {
      failed += 1;
      io.err((err as Error).message);
    }
  }
  const after = await depositOf(c, signed);
  io.out(`deposit of ${signed.paymaster} went from ${before} to ${after} wei (+${after - before})`);
  if (failed > 0) throw new OperatorError(`${failed} of ${hashes.length} transfers failed`);
}

function depositOf(c: Clients, signed: Pick<SignedSweep, "entryPoint" | "paymaster">): Promise<bigint> {
  return c.publicClient.readContract({
    address: signed.entryPoint,
    abi: stakeManagerAbi,
    functionName: "balanceOf",
    args: [signed.paymaster],
  });
}
