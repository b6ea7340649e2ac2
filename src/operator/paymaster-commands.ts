/**
 * The owner's actions on a deployed SponsorPaymaster: deploy it, fund and stake it in its
 * EntryPoint, take funds back, replace or rotate its signer. Each one sends one transaction (deploy
 * with an owner: two) with the key in OPERATOR_PRIVATE_KEY and prints what changed on chain.
 */
import { readFileSync } from "node:fs";
import { type Abi, type Address, formatUnits, getAddress, type Hex, parseAbi, zeroAddress } from "viem";
import { sponsorPaymasterAbi } from "../paymaster/abi.ts";
import { type Io, OperatorError, requirePaymaster, type Target, type WriteClients } from "./context.ts";
import { explain, sendWrite, waitFor } from "./send.ts";

/** The EntryPoint's view of an account's funds (StakeManager.DepositInfo, the same in v0.7 and v0.8). */
export const stakeManagerAbi = parseAbi([
  "struct DepositInfo { uint256 deposit; bool staked; uint112 stake; uint32 unstakeDelaySec; uint48 withdrawTime; }",
  "function getDepositInfo(address account) view returns (DepositInfo info)",
  "function balanceOf(address account) view returns (uint256)",
  "function depositTo(address account) payable",
]);

/** BasePaymaster of v0.8 is Ownable2Step: a new owner has to accept. */
const ownable2StepAbi = parseAbi(["function pendingOwner() view returns (address)"]);

/** What the contract itself bounds: a previous key lives at most a day (MAX_PREVIOUS_SIGNER_GRACE). */
export const MAX_PREVIOUS_VALID_FOR_SEC = 86_400;

const ARTIFACT = { "0.7": "SponsorPaymaster", "0.8": "SponsorPaymasterV08" } as const;

function artifactOf(target: Target): { name: string; abi: Abi; bytecode: Hex } {
  const name = ARTIFACT[target.version];
  const url = new URL(`../../contracts/artifacts/${name}.json`, import.meta.url);
  const { abi, bytecode } = JSON.parse(readFileSync(url, "utf8")) as { abi: Abi; bytecode: Hex };
  return { name, abi, bytecode };
}

function money(wei: bigint, target: Target): string {
  return `${formatUnits(wei, target.decimals)} ${target.currency} (${wei} wei)`;
}

export function depositInfo(c: Pick<WriteClients, "publicClient" | "target">, paymaster: Address) {
  return c.publicClient.readContract({
    address: c.target.entryPoint,
    abi: stakeManagerAbi,
    functionName: "getDepositInfo",
    args: [paymaster],
  });
}

export async function deploy(
  c: WriteClients,
  opts: { signer: Address; owner?: Address },
  io: Io,
): Promise<void> {
  const { target } = c;
  if (opts.signer === zeroAddress) throw new OperatorError("--signer must not be the zero address");
  const code = await c.publicClient.getCode({ address: target.entryPoint });
  if (!code || code === "0x") {
    throw new OperatorError(
      `no EntryPoint v${target.version} at ${target.entryPoint} on chain ${target.chainId}`,
    );
  }
  const artifact = artifactOf(target);
  let hash: Hex;
  try {
    hash = await c.wallet.deployContract({
      abi: artifact.abi,
      bytecode: artifact.bytecode,
      args: [target.entryPoint, opts.signer],
    });
  } catch (err) {
    throw explain(err, `deploying ${artifact.name}`, c);
  }
  const receipt = await waitFor(c, `deploying ${artifact.name}`, hash);
  if (!receipt.contractAddress)
    throw new OperatorError(`deploying ${artifact.name}: no contract was created`);
  const paymaster = getAddress(receipt.contractAddress);
  io.err(`deployed ${artifact.name} for EntryPoint v${target.version} ${target.entryPoint} (tx ${hash})`);

  const owner = opts.owner;
  if (owner && owner !== c.wallet.account.address) {
    await sendWrite(c, "transferring ownership", {
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "transferOwnership",
      args: [owner],
    });
    // v0.7's Ownable hands over at once; v0.8's Ownable2Step only names a pending owner.
    io.err(
      target.version === "0.8"
        ? `ownership offered to ${owner}: it takes effect when ${owner} calls acceptOwnership()`
        : `owner is now ${owner}`,
    );
  }
  io.out(`paymaster ${paymaster}`);
  io.out(`${target.paymasterSetting}=${paymaster}`);
}

export async function deposit(c: WriteClients, amountWei: bigint, io: Io): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  if (amountWei === 0n) throw new OperatorError("--amount must be more than 0");
  const receipt = await sendWrite(c, "deposit", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "deposit",
    args: [],
    value: amountWei,
  });
  const info = await depositInfo(c, paymaster);
  io.out(`deposited ${money(amountWei, c.target)} (tx ${receipt.transactionHash})`);
  io.out(`deposit is now ${money(info.deposit, c.target)}`);
}

export async function stake(c: WriteClients, opts: { amountWei: bigint; unstakeDelaySec: number }, io: Io) {
  const paymaster = requirePaymaster(c.target);
  const receipt = await sendWrite(c, "stake", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "addStake",
    args: [opts.unstakeDelaySec],
    value: opts.amountWei,
  });
  const info = await depositInfo(c, paymaster);
  io.out(`staked ${money(opts.amountWei, c.target)} (tx ${receipt.transactionHash})`);
  io.out(`stake is now ${money(info.stake, c.target)}, unstake delay ${info.unstakeDelaySec} s`);
}

export async function unlockStake(c: WriteClients, io: Io): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  const receipt = await sendWrite(c, "unlock-stake", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "unlockStake",
    args: [],
  });
  const info = await depositInfo(c, paymaster);
  const at = new Date(Number(info.withdrawTime) * 1000).toISOString();
  io.out(
    `stake unlocked (tx ${receipt.transactionHash}); withdraw-stake from ${at} (block time ${info.withdrawTime})`,
  );
  io.out("bundlers treat the paymaster as unstaked from now on");
}

export async function withdrawStake(c: WriteClients, to: Address, io: Io): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  const before = await depositInfo(c, paymaster);
  const receipt = await sendWrite(c, "withdraw-stake", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "withdrawStake",
    args: [to],
  });
  io.out(`withdrew the stake of ${money(before.stake, c.target)} to ${to} (tx ${receipt.transactionHash})`);
}

export async function withdraw(
  c: WriteClients,
  opts: { to: Address; amountWei: bigint },
  io: Io,
): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  const before = await depositInfo(c, paymaster);
  if (opts.amountWei > before.deposit) {
    throw new OperatorError(`withdraw: the deposit holds only ${money(before.deposit, c.target)}`);
  }
  const receipt = await sendWrite(c, "withdraw", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "withdrawTo",
    args: [opts.to, opts.amountWei],
  });
  const after = await depositInfo(c, paymaster);
  io.out(`withdrew ${money(opts.amountWei, c.target)} to ${opts.to} (tx ${receipt.transactionHash})`);
  io.out(`deposit is now ${money(after.deposit, c.target)}`);
}

export async function setSigner(c: WriteClients, signer: Address, io: Io): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  const receipt = await sendWrite(c, "set-signer", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "setSigner",
    args: [signer],
  });
  io.out(`signer is now ${signer} (tx ${receipt.transactionHash})`);
  io.out("authorizations signed by any other key are refused from now on");
}

/**
 * The deadline is counted from the latest block's time, the clock the contract and the
 * EntryPoint use, not from this machine's clock.
 */
export async function rotateSigner(
  c: WriteClients,
  opts: { signer: Address; previousValidForSec: number },
  io: Io,
): Promise<void> {
  const paymaster = requirePaymaster(c.target);
  const block = await c.publicClient.getBlock({ blockTag: "latest" });
  const previousValidUntil = Number(block.timestamp) + opts.previousValidForSec;
  const previous = await c.publicClient.readContract({
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "signer",
  });
  const receipt = await sendWrite(c, "rotate-signer", {
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "rotateSigner",
    args: [opts.signer, previousValidUntil],
  });
  const at = new Date(previousValidUntil * 1000).toISOString();
  io.out(`signer is now ${opts.signer} (tx ${receipt.transactionHash})`);
  io.out(`previous signer ${previous} stays accepted until ${at} (block time ${previousValidUntil})`);
  io.out("now restart the service with SIGNER_PRIVATE_KEY set to the new signer's key");
}

/** The pending owner of a v0.8 paymaster, or null (v0.7 has none). */
export async function pendingOwner(c: Pick<WriteClients, "publicClient" | "target">, paymaster: Address) {
  if (c.target.version !== "0.8") return null;
  return c.publicClient.readContract({
    address: paymaster,
    abi: ownable2StepAbi,
    functionName: "pendingOwner",
  });
}
