/**
 * `check`: is the configured paymaster the one the service can work with? It reads the chain once
 * (readPaymasterState) and judges with a pure function (judge), so every verdict is testable
 * without a chain. A failure is anything that makes authorizations useless or bundlers refuse
 * them: no contract, another EntryPoint, a signer that is not the service's key, no deposit, no
 * (or an unlocking) stake.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Address, formatUnits, type Hex, isHex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { sponsorPaymasterAbi } from "../paymaster/abi.ts";
import { stakeState } from "../paymaster/stake.ts";
import { type Clients, OperatorError, type Target } from "./context.ts";
import { depositInfo, pendingOwner } from "./paymaster-commands.ts";

export interface PaymasterState {
  paymaster: Address;
  hasCode: boolean;
  /** Null when the contract does not answer (not a SponsorPaymaster). */
  entryPoint: Address | null;
  signer: Address | null;
  owner: Address | null;
  pendingOwner: Address | null;
  /** Null on a deployment from before rotateSigner existed. */
  previous: { signer: Address; validUntilSec: number } | null;
  /** The paymaster's funds in the configured EntryPoint; null when nothing answers there. */
  deposit: {
    depositWei: bigint;
    staked: boolean;
    stakeWei: bigint;
    unstakeDelaySec: number;
    withdrawTimeSec: number;
  } | null;
  latestTimestampSec: number;
}

export interface Expectations {
  entryPoint: Address;
  version: string;
  /** The address the service signs with, and where that was read from (for the message). */
  signer: Address;
  signerSource: string;
  minDepositWei: bigint;
  minStakeWei: bigint;
  minUnstakeDelaySec: number;
  currency: string;
  /** Decimals of the chain's native currency. */
  decimals: number;
}

export interface Finding {
  level: "ok" | "fail" | "info";
  text: string;
}

export function judge(s: PaymasterState, x: Expectations): Finding[] {
  const findings = judgeIdentity(s, x);
  // No SponsorPaymaster there: nothing else to read.
  if (!s.hasCode || s.entryPoint === null || s.signer === null) return findings;
  findings.push(...judgeFunds(s, x));
  const info = (text: string): Finding => ({ level: "info", text });
  if (s.owner) findings.push(info(`owner ${s.owner}`));
  if (s.pendingOwner && !same(s.pendingOwner, "0x0000000000000000000000000000000000000000")) {
    findings.push(info(`ownership offered to ${s.pendingOwner}, not yet accepted`));
  }
  return findings;
}

/**
 * Whether the contract can honour what the service signs: a SponsorPaymaster on the configured
 * EntryPoint whose signer is the service's key. Readiness runs this part on every instance
 * (health/paymaster-identity.ts); funds and stake are judged apart.
 */
export function judgeIdentity(
  s: Omit<PaymasterState, "deposit" | "owner" | "pendingOwner">,
  x: Pick<Expectations, "entryPoint" | "version" | "signer" | "signerSource">,
): Finding[] {
  const ok = (text: string): Finding => ({ level: "ok", text });
  const fail = (text: string): Finding => ({ level: "fail", text });
  if (!s.hasCode) return [fail(`no contract at ${s.paymaster}`)];
  if (s.entryPoint === null || s.signer === null) {
    return [fail(`${s.paymaster} does not answer entryPoint() and signer(): not a SponsorPaymaster`)];
  }
  const findings: Finding[] = [ok(`contract at ${s.paymaster}`)];
  findings.push(
    same(s.entryPoint, x.entryPoint)
      ? ok(`entryPoint() is EntryPoint v${x.version} ${x.entryPoint}`)
      : fail(
          `entryPoint() is ${s.entryPoint}, but the configured EntryPoint v${x.version} is ${x.entryPoint}`,
        ),
  );
  findings.push(...judgeSigner(s, x));
  return findings;
}

function judgeFunds(s: PaymasterState, x: Expectations): Finding[] {
  const money = (wei: bigint) => `${formatUnits(wei, x.decimals)} ${x.currency}`;
  const d = s.deposit;
  if (d === null)
    return [{ level: "fail", text: `no EntryPoint answers at ${x.entryPoint}: deposit and stake unknown` }];
  const findings: Finding[] = [];
  findings.push(
    d.depositWei >= x.minDepositWei
      ? { level: "ok", text: `deposit ${money(d.depositWei)}` }
      : {
          level: "fail",
          text: `deposit ${money(d.depositWei)} is below ${money(x.minDepositWei)}: sponsored gas is paid from it`,
        },
  );
  const stake = {
    staked: null,
    unlocking: `stake is unlocking (withdrawable at block time ${d.withdrawTimeSec}): bundlers treat it as unstaked`,
    unstaked: "not staked: public bundlers refuse a paymaster that uses its storage in validation (ERC-7562)",
    below_minimum:
      `stake ${money(d.stakeWei)} with an unstake delay of ${d.unstakeDelaySec} s is below the minimum ` +
      `(${money(x.minStakeWei)}, ${x.minUnstakeDelaySec} s)`,
  }[stakeState(d, x)];
  findings.push(
    stake === null
      ? { level: "ok", text: `stake ${money(d.stakeWei)}, unstake delay ${d.unstakeDelaySec} s, locked` }
      : { level: "fail", text: stake },
  );
  return findings;
}

function judgeSigner(
  s: Pick<PaymasterState, "signer" | "previous" | "latestTimestampSec">,
  x: Pick<Expectations, "signer" | "signerSource">,
): Finding[] {
  const signer = s.signer!;
  const previous = s.previous;
  const inGrace = previous !== null && previous.validUntilSec >= s.latestTimestampSec;
  const findings: Finding[] = [];
  if (same(signer, x.signer)) {
    findings.push({ level: "ok", text: `signer() is ${signer}, the address of ${x.signerSource}` });
  } else if (inGrace && same(previous.signer, x.signer)) {
    findings.push({
      level: "fail",
      text:
        `${x.signerSource} is the previous signer ${x.signer}, accepted only until block time ` +
        `${previous.validUntilSec} (${previous.validUntilSec - s.latestTimestampSec} s): restart the service with the key of ${signer}`,
    });
  } else {
    findings.push({ level: "fail", text: `signer() is ${signer}, but ${x.signerSource} is ${x.signer}` });
  }
  if (previous === null) {
    findings.push({
      level: "info",
      text: "this deployment has no rotateSigner: a key change breaks authorizations in flight",
    });
  } else if (inGrace) {
    const left = previous.validUntilSec - s.latestTimestampSec;
    findings.push({
      level: "info",
      text: `previous signer ${previous.signer} accepted until block time ${previous.validUntilSec} (${left} s from now)`,
    });
  }
  return findings;
}

function same(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

export async function readPaymasterState(c: Clients, paymaster: Address): Promise<PaymasterState> {
  const { publicClient } = c;
  const [code, block, info] = await Promise.all([
    publicClient.getCode({ address: paymaster }),
    publicClient.getBlock({ blockTag: "latest" }),
    depositInfo(c, paymaster).catch(() => null),
  ]);
  const read = async <T>(functionName: string): Promise<T | null> => {
    try {
      return (await publicClient.readContract({
        address: paymaster,
        abi: sponsorPaymasterAbi,
        functionName: functionName as "signer",
      })) as T;
    } catch {
      return null;
    }
  };
  const hasCode = code !== undefined && code !== "0x";
  const [entryPoint, signer, owner, previousSigner, previousValidUntil] = hasCode
    ? await Promise.all([
        read<Address>("entryPoint"),
        read<Address>("signer"),
        read<Address>("owner"),
        read<Address>("previousSigner"),
        read<number>("previousSignerValidUntil"),
      ])
    : [null, null, null, null, null];
  return {
    paymaster,
    hasCode,
    entryPoint,
    signer,
    owner,
    pendingOwner: hasCode ? await pendingOwner(c, paymaster).catch(() => null) : null,
    previous:
      previousSigner === null || previousValidUntil === null
        ? null
        : { signer: previousSigner, validUntilSec: Number(previousValidUntil) },
    deposit: info && {
      depositWei: info.deposit,
      staked: info.staked,
      stakeWei: info.stake,
      unstakeDelaySec: info.unstakeDelaySec,
      withdrawTimeSec: Number(info.withdrawTime),
    },
    latestTimestampSec: Number(block.timestamp),
  };
}

/**
 * The address the service signs with, found the way the service finds its key: SIGNER_PRIVATE_KEY,
 * else the key it generated into DATA_DIR. Read only: a check never creates a key.
 */
export function serviceSigner(target: Target): { address: Address; source: string } {
  const { config } = target;
  if (config.signerPrivateKey) {
    return { address: privateKeyToAddress(config.signerPrivateKey), source: "SIGNER_PRIVATE_KEY" };
  }
  const path = join(config.dataDir, "signer.key");
  if (!config.dataDir.startsWith("memory://") && existsSync(path)) {
    const raw = readFileSync(path, "utf8").trim();
    const hex = (raw.startsWith("0x") ? raw : `0x${raw}`) as Hex;
    if (isHex(hex) && hex.length === 66) return { address: privateKeyToAddress(hex), source: `${path}` };
  }
  throw new OperatorError("no signer to compare with: set SIGNER_PRIVATE_KEY or pass --signer <address>");
}
