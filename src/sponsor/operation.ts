/**
 * Sponsoring a whole user operation (ERC-7677): the use case behind `pm_getPaymasterStubData`
 * and `pm_getPaymasterData`. Unlike `POST /sponsor/authorize`, the service sees the operation,
 * so it decides on all of it: the sender's code must be a known implementation (sender-code.ts),
 * every call its account will make is decoded (accounts/calls.ts) with an encoding that
 * implementation really has and must be allowlisted, its preVerificationGas must be within what
 * its size can cost a bundle (pre-verification.ts), its fees are checked against the chain's market, the reservation is the
 * operation's own maximum cost, and the signature (a mode 1 authorization) binds every field of
 * the operation but its signature, so nothing can be changed after signing.
 *
 * The stub decides the same way but reserves nothing; the final call reserves once per operation:
 * its idempotency key is the operation itself, so a wallet that asks twice for the same
 * operation gets the same answer, byte for byte, and one reservation.
 */

import { hash } from "node:crypto";
import { type Address, concatHex, type Hex, numberToHex } from "viem";
import { type DecodedCall, decodeCalls } from "../accounts/calls.ts";
import type { SenderCodeResolver } from "../accounts/code/resolve.ts";
import { type ChainConfig, type Config, liveEntryPointAt } from "../config.ts";
import type { ErrorCode } from "../http/catalogue.ts";
import type { ReservationBatcher } from "../ledger/batcher.ts";
import type { Reservation, ReserveOutcome } from "../ledger/ledger.ts";
import {
  isEip7702InitCode,
  operationSponsorshipDigest,
  type SponsoredOperation,
} from "../paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS } from "../paymaster/gas.ts";
import {
  encodeOperationPaymasterAndData,
  PAYMASTER_AND_DATA_SIZE,
  PAYMASTER_DATA_OFFSET,
  stubPaymasterAndData,
} from "../paymaster/layout.ts";
import { type RefusalWords, reservationRefusal } from "../policies/refusals.ts";
import type { ApprovalOutcome, ApprovalRequest } from "../webhooks/approval.ts";
import { randomAuthId } from "./ids.ts";
import { MAX_ESTIMATED_GAS, type ProjectSponsorTerms, validityWindow } from "./policy.ts";
import { operationPreVerificationCeiling } from "./pre-verification.ts";
import type { FeeCeilings } from "./pricing.ts";
import { verifySenderCode } from "./sender-code.ts";
import type { Signer } from "./signer.ts";

/** A user operation as ERC-7677 carries it (EntryPoint v0.7 / v0.8 fields), parsed to numbers. */
export interface OperationFields {
  sender: Address;
  nonce: bigint;
  factory: Address | null;
  factoryData: Hex;
  callData: Hex;
  callGasLimit: bigint;
  verificationGasLimit: bigint;
  preVerificationGas: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  paymasterVerificationGasLimit: bigint | null;
  paymasterPostOpGasLimit: bigint | null;
  /** EIP-7702 (EntryPoint v0.8): the implementation the sender's authorization delegates to. */
  eip7702Delegate: Address | null;
}

export type ProjectTerms = ProjectSponsorTerms;

export interface OperationRequest {
  projectId: string;
  apiKeyId: number | null;
  chainId: number;
  entryPoint: Address;
  userOp: OperationFields;
}

export interface StubResult {
  paymaster: Address;
  paymasterData: Hex;
  paymasterVerificationGasLimit: Hex;
  paymasterPostOpGasLimit: Hex;
  isFinal: false;
  sponsor: { name: string; icon?: string };
}

export type Refusal = {
  kind: "refused";
  code: ErrorCode;
  detail: string;
  callIndex?: number;
  /** The project's policy rule that refused it. */
  ruleId?: string;
};

export type StubOutcome = { kind: "stub"; result: StubResult } | Refusal;
export type FinalOutcome = { kind: "sponsored"; body: string; replayed: boolean } | Refusal;

export interface OperationDeps {
  config: Pick<Config, "chains" | "clockSkewSec" | "preVerification">;
  signer: Signer;
  reservations: ReservationBatcher;
  feeCeilings(chainId: number): FeeCeilings | null;
  /** Reads the chain's fees now instead of from the cache (the oracle may trail the client). */
  refreshFees(): Promise<void>;
  /** The project's name and icon (shown to wallets), validity TTL and unknown-account setting. */
  projectTerms(projectId: string): Promise<ProjectTerms>;
  senderCode: SenderCodeResolver;
  /**
   * Decides as the reservation would, writing nothing (ledger.dryRunReservation): the one place,
   * with the reservation itself, where the allowlist, the policies and the tank are decided.
   */
  dryRun(r: Reservation): Promise<ReserveOutcome>;
  /** The project's approval webhook, asked before the final signature (not for stubs). */
  approve?(req: ApprovalRequest): Promise<ApprovalOutcome>;
  now(): number;
}

/**
 * A client's fees are accepted up to twice the market's ceilings: viem doubles its own estimate
 * for bundlers' fee prechecks, and in a whole-operation authorization the fees are the client's
 * (the reservation is the operation's own maximum cost). The configured ceiling still bounds all.
 */
export const OPERATION_FEE_TOLERANCE = 2n;

export async function stubOperation(deps: OperationDeps, req: OperationRequest): Promise<StubOutcome> {
  const checked = await checkOperation(deps, req, { final: false });
  if (checked.kind === "refused") return checked;
  const nowMs = deps.now();
  const data = stubPaymasterAndData({
    paymaster: checked.paymaster,
    mode: "operation",
    gas: PAYMASTER_GAS_LIMITS,
    ...validityWindow(nowMs, checked.project.ttlSec, deps.config.clockSkewSec),
  });
  return {
    kind: "stub",
    result: {
      paymaster: checked.paymaster,
      paymasterData: paymasterDataOf(data),
      paymasterVerificationGasLimit: numberToHex(PAYMASTER_GAS_LIMITS.verificationGasLimit),
      paymasterPostOpGasLimit: numberToHex(PAYMASTER_GAS_LIMITS.postOpGasLimit),
      isFinal: false,
      sponsor: checked.project.icon
        ? { name: checked.project.name, icon: checked.project.icon }
        : { name: checked.project.name },
    },
  };
}

export async function sponsorOperation(deps: OperationDeps, req: OperationRequest): Promise<FinalOutcome> {
  const checked = await checkOperation(deps, req, { final: true });
  if (checked.kind === "refused") return checked;
  const { userOp } = req;
  const approval = await deps.approve?.({
    projectId: req.projectId,
    mode: "operation",
    chainId: req.chainId,
    sender: userOp.sender.toLowerCase(),
    calls: checked.calls.map((c) => ({ target: c.target, selector: c.selector })),
    maxGasCostWei: checked.maxCostWei,
    maxTotalGas: checked.totalGas,
    entryPoint: req.entryPoint.toLowerCase(),
  });
  if (approval?.kind === "refused") return refuse(approval.code, approval.detail);
  const nowMs = deps.now();
  const terms = {
    ...validityWindow(nowMs, checked.project.ttlSec, deps.config.clockSkewSec),
    authId: randomAuthId(),
    senderCodeHash: checked.senderCodeHash,
  };
  const domain = { chainId: req.chainId, paymaster: checked.paymaster };
  const packed = packOperation(userOp);
  const signature = deps.signer.signDigest(
    operationSponsorshipDigest(domain, PAYMASTER_GAS_LIMITS, packed, terms),
  );
  const paymasterAndData = encodeOperationPaymasterAndData(domain, PAYMASTER_GAS_LIMITS, terms, signature);
  const body = JSON.stringify({
    paymaster: checked.paymaster,
    paymasterData: paymasterDataOf(paymasterAndData),
  });
  // The operation is its own idempotency key: asking again for it replays this answer.
  const opKey = operationKey(req);
  const first = checked.calls[0]!;
  const outcome = await deps.reservations.reserve({
    projectId: req.projectId,
    clientNonce: `op:${opKey.slice(0, 64)}`,
    requestDigest: opKey,
    authId: terms.authId,
    apiKeyId: req.apiKeyId,
    chainId: req.chainId,
    sender: userOp.sender.toLowerCase(),
    target: first.target,
    selector: first.selector,
    estimatedGas: checked.totalGas,
    maxGasCostWei: checked.maxCostWei,
    maxFeePerGasWei: userOp.maxFeePerGas,
    maxPriorityFeePerGasWei: userOp.maxPriorityFeePerGas,
    paymaster: checked.paymaster.toLowerCase(),
    validAfterSec: terms.validAfterSec,
    validUntilSec: terms.validUntilSec,
    response: body,
    requestedAtMs: nowMs,
    calls: checked.calls.map((c) => ({ target: c.target, selector: c.selector })),
  });
  switch (outcome.kind) {
    case "reserved":
      return { kind: "sponsored", body, replayed: false };
    case "replay":
      // The key is a digest of the whole operation, so a replay is always of the same one.
      return { kind: "sponsored", body: outcome.response ?? body, replayed: true };
    default:
      return reservationRefusal(outcome, operationWords(checked.calls))!;
  }
}

/**
 * The operation as the dry run asks about it, at a given cost: 0 wei for what refuses at any
 * price (the allowlist, the sender lists, the campaign, caps already used up), or its maximum
 * cost for everything the reservation will decide. Never stored.
 */
function dryRunReservation(
  req: OperationRequest,
  checked: Pick<Checked, "paymaster" | "calls" | "totalGas">,
  nowMs: number,
  costWei: bigint,
): Reservation {
  const first = checked.calls[0]!;
  const nowSec = Math.floor(nowMs / 1000);
  return {
    projectId: req.projectId,
    clientNonce: null,
    requestDigest: null,
    authId: `0x${"0".repeat(64)}`,
    apiKeyId: req.apiKeyId,
    chainId: req.chainId,
    sender: req.userOp.sender.toLowerCase(),
    target: first.target,
    selector: first.selector,
    estimatedGas: checked.totalGas,
    maxGasCostWei: costWei,
    maxFeePerGasWei: 0n,
    maxPriorityFeePerGasWei: 0n,
    paymaster: checked.paymaster.toLowerCase(),
    validAfterSec: nowSec,
    validUntilSec: nowSec + 1,
    response: null,
    requestedAtMs: nowMs,
    calls: checked.calls.map((c) => ({ target: c.target, selector: c.selector })),
  };
}

interface Checked {
  kind: "checked";
  paymaster: Address;
  /** What the paymaster checks EXTCODEHASH(sender) against (sender-code.ts). */
  senderCodeHash: Hex;
  calls: DecodedCall[];
  project: ProjectTerms;
  totalGas: bigint;
  maxCostWei: bigint;
}

/** Everything both calls decide, in order: chain and entry point, the calls, fees, gas, the tank. */
async function checkOperation(
  deps: OperationDeps,
  req: OperationRequest,
  { final }: { final: boolean },
): Promise<Checked | Refusal> {
  const chain = deps.config.chains.find((c) => c.chainId === req.chainId && c.active);
  if (!chain) return refuse("unsupported_chain", `chain ${req.chainId} is not supported`);
  const live = liveEntryPointAt(chain, req.entryPoint);
  const paymaster = live?.paymaster ?? null;
  if (!paymaster) {
    return refuse(
      "unsupported_entry_point",
      `entry point ${req.entryPoint} is not served on chain ${chain.chainId}`,
    );
  }
  const decoded = decodeCalls(req.userOp.callData);
  if (decoded.kind === "refused") {
    return {
      kind: "refused",
      code: decoded.code,
      detail: decoded.detail,
      callIndex: decoded.callIndex,
    };
  }
  const { calls } = decoded;
  if (calls.length === 0) return refuse("unsupported_call", "the operation makes no call");
  const { userOp } = req;
  // What needs no price first (the body, the allowlist, the sender policies), so that with the
  // chain's RPC down a call the studio does not allow is still 403, not a retryable 503.
  const gasRefusal = checkPaymasterGas(userOp);
  if (gasRefusal) return gasRefusal;
  if (isEip7702InitCode(initCodeOf(userOp))) {
    if (live?.version !== "0.8") {
      return refuse(
        "invalid_params",
        "EIP-7702 operations need EntryPoint v0.8; v0.7 would call 0x7702… as a factory",
      );
    }
    if (!userOp.eip7702Delegate) {
      return refuse("invalid_params", "an EIP-7702 operation needs eip7702Auth (the delegate it binds)");
    }
  }
  const totalGas =
    userOp.verificationGasLimit +
    userOp.callGasLimit +
    userOp.preVerificationGas +
    PAYMASTER_GAS_LIMITS.verificationGasLimit +
    PAYMASTER_GAS_LIMITS.postOpGasLimit;
  if (totalGas > MAX_ESTIMATED_GAS) {
    return refuse("invalid_params", `the operation's gas limits add up to more than ${MAX_ESTIMATED_GAS}`);
  }
  let feeRefusal = checkFees(deps.feeCeilings(req.chainId), chain, userOp, final);
  if (feeRefusal?.code === "fee_above_ceiling") {
    // The client read the chain after the oracle's last refresh (the priority fee moves fast on
    // a busy chain): before refusing, look again.
    await deps.refreshFees();
    feeRefusal = checkFees(deps.feeCeilings(req.chainId), chain, userOp, final);
  }
  const words = operationWords(calls);
  const ask = async (costWei: bigint) =>
    deps.dryRun(dryRunReservation(req, { paymaster, calls, totalGas }, deps.now(), costWei));
  if (feeRefusal || !final) {
    // What refuses at any price comes before a fee refusal (a call the studio does not allow is
    // 403 with the chain's RPC down, not a retryable 503), and is all a stub can be refused for
    // by the rules: its gas limits are not final yet.
    const anyPrice = reservationRefusal(await ask(0n), words);
    if (anyPrice) return anyPrice;
    if (feeRefusal) return feeRefusal;
  }
  const maxCostWei = totalGas * userOp.maxFeePerGas;
  // The final call: everything the reservation will decide, at the cost it will reserve. The
  // stub: only whether the tank can cover the operation as it stands (an empty one is refused at
  // once; the rules wait for the final limits).
  const priced = await ask(maxCostWei);
  const pricedRefusal =
    final || priced.kind === "insufficient_balance" ? reservationRefusal(priced, words) : null;
  if (pricedRefusal) return pricedRefusal;
  const project = await deps.projectTerms(req.projectId);
  // The sender's code last: the refusals above need no chain (INTERFACE.md's 403 and 402 come
  // first, whatever the account).
  const code = await verifySenderCode(
    deps.senderCode,
    {
      chainId: req.chainId,
      entryPoint: req.entryPoint,
      sender: userOp.sender,
      initCode: initCodeOf(userOp),
      eip7702Delegate: userOp.eip7702Delegate,
    },
    project.unknownAccounts,
    { kind: "encoding", encoding: decoded.encoding },
  );
  if (code.kind === "refused") return refuse(code.code, code.detail);
  if (final) {
    const ceiling = operationPreVerificationCeiling(
      {
        initCode: initCodeOf(userOp),
        callData: userOp.callData,
        eip7702Authorization: userOp.eip7702Delegate !== null,
      },
      PAYMASTER_AND_DATA_SIZE.operation,
      deps.config.preVerification,
    );
    if (userOp.preVerificationGas > ceiling) {
      return refuse(
        "invalid_params",
        `preVerificationGas ${userOp.preVerificationGas} is above ${ceiling}, the most a bundle can spend on this operation outside its gas limits`,
      );
    }
  }
  return { kind: "checked", paymaster, senderCodeHash: code.codeHash, calls, project, totalGas, maxCostWei };
}

function checkFees(
  ceilings: FeeCeilings | null,
  chain: ChainConfig,
  userOp: OperationFields,
  final: boolean,
): Refusal | null {
  if (!ceilings) {
    return refuse("fee_oracle_stale", `no recent fee reading for chain ${chain.chainId}; retry shortly`);
  }
  const maxFee = min(ceilings.maxFeePerGasWei * OPERATION_FEE_TOLERANCE, chain.maxFeePerGasWei);
  const maxPriority = min(ceilings.maxPriorityFeePerGasWei * OPERATION_FEE_TOLERANCE, maxFee);
  if (userOp.maxFeePerGas > maxFee || userOp.maxPriorityFeePerGas > maxPriority) {
    return refuse(
      "fee_above_ceiling",
      `fees above what the chain charges now: maxFeePerGas ${userOp.maxFeePerGas} (≤ ${maxFee}), maxPriorityFeePerGas ${userOp.maxPriorityFeePerGas} (≤ ${maxPriority})`,
    );
  }
  if (final && (userOp.maxFeePerGas === 0n || userOp.callGasLimit + userOp.verificationGasLimit === 0n)) {
    return refuse("invalid_params", "the final call needs the operation's gas limits and fees");
  }
  return null;
}

/** The paymaster's limits are the service's own: a client may omit them, not change them. */
function checkPaymasterGas(userOp: OperationFields): Refusal | null {
  const v = userOp.paymasterVerificationGasLimit;
  const p = userOp.paymasterPostOpGasLimit;
  if (
    (v !== null && v !== PAYMASTER_GAS_LIMITS.verificationGasLimit) ||
    (p !== null && p !== PAYMASTER_GAS_LIMITS.postOpGasLimit)
  ) {
    return refuse(
      "invalid_params",
      `paymasterVerificationGasLimit must be ${numberToHex(PAYMASTER_GAS_LIMITS.verificationGasLimit)} and paymasterPostOpGasLimit ${numberToHex(PAYMASTER_GAS_LIMITS.postOpGasLimit)} (from pm_getPaymasterStubData)`,
    );
  }
  return null;
}

/** The operation as the EntryPoint packs it, without paymasterAndData and signature. */
export function packOperation(userOp: OperationFields): SponsoredOperation {
  return {
    sender: userOp.sender,
    nonce: userOp.nonce,
    initCode: initCodeOf(userOp),
    eip7702Delegate: userOp.eip7702Delegate ?? undefined,
    callData: userOp.callData,
    accountGasLimits: concatHex([
      numberToHex(userOp.verificationGasLimit, { size: 16 }),
      numberToHex(userOp.callGasLimit, { size: 16 }),
    ]),
    preVerificationGas: userOp.preVerificationGas,
    gasFees: concatHex([
      numberToHex(userOp.maxPriorityFeePerGas, { size: 16 }),
      numberToHex(userOp.maxFeePerGas, { size: 16 }),
    ]),
  };
}

function initCodeOf(userOp: OperationFields): Hex {
  return userOp.factory ? concatHex([userOp.factory, userOp.factoryData]) : "0x";
}

/** A digest of everything that makes the operation this operation (and where it runs). */
function operationKey(req: OperationRequest): string {
  const p = packOperation(req.userOp);
  const parts = [
    req.projectId,
    req.chainId,
    req.entryPoint.toLowerCase(),
    p.sender.toLowerCase(),
    p.nonce,
    p.initCode.toLowerCase(),
    p.eip7702Delegate?.toLowerCase() ?? "",
    p.callData.toLowerCase(),
    p.accountGasLimits,
    p.preVerificationGas,
    p.gasFees,
  ];
  return hash("sha256", parts.join("|"), "hex");
}

function paymasterDataOf(paymasterAndData: Hex): Hex {
  return `0x${paymasterAndData.slice(2 + PAYMASTER_DATA_OFFSET * 2)}`;
}

/** How an operation words the refusals that name no rule: which of its calls, which tank. */
function operationWords(calls: DecodedCall[]): RefusalWords {
  return {
    notAllowlisted: (index) => notAllowlisted(calls, index),
    insufficientBalance: INSUFFICIENT_BALANCE,
  };
}

const INSUFFICIENT_BALANCE = "the gas tank cannot cover the operation's maximum cost";

function notAllowlisted(calls: DecodedCall[], index: number): Refusal {
  const call = calls[index]!;
  return {
    kind: "refused",
    code: "not_allowlisted",
    detail: `call ${index} (${call.target}, ${call.selector}) is not allowlisted`,
    callIndex: index,
  };
}

function refuse(code: ErrorCode, detail: string): Refusal {
  return { kind: "refused", code, detail };
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
