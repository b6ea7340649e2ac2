/**
 * The authorize use case: one request in, one outcome value out. The route (routes.ts) only maps
 * HTTP to this and the outcome back to HTTP.
 *
 * Order: the pure quote (chain, fee ceilings, window), the sender's code (sender-code.ts: cached,
 * so off the hot path after a sender's first request), then signing, then one round trip to the
 * database that replays an idempotent request or checks the allowlist, the project's policies,
 * the tank and the daily cap and reserves (ledger/ledger.ts, db/functions/reserve_sponsorships.sql). The signature is made before that round trip
 * because the stored response of an idempotent request must be the signed one; a refused
 * request's signature never leaves the process.
 */

import { hash } from "node:crypto";
import type { Address, Hex } from "viem";
import type { SenderCodeResolver } from "../accounts/code/resolve.ts";
import type { Config } from "../config.ts";
import type { ErrorCode } from "../http/catalogue.ts";
import type { ReservationBatcher } from "../ledger/batcher.ts";
import type { Reservation, ReserveOutcome } from "../ledger/ledger.ts";
import { type CallAuthorization, callSponsorshipDigest } from "../paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS } from "../paymaster/gas.ts";
import {
  encodeCallPaymasterAndData,
  PAYMASTER_AND_DATA_SIZE,
  PAYMASTER_DATA_OFFSET,
  ZERO_HASH,
} from "../paymaster/layout.ts";
import { type RefusalWords, reservationRefusal } from "../policies/refusals.ts";
import type { ApprovalOutcome, ApprovalRequest } from "../webhooks/approval.ts";
import { randomAuthId } from "./ids.ts";
import { type Quote, quote } from "./policy.ts";
import { callPreVerificationCeiling } from "./pre-verification.ts";
import type { FeeCeilings } from "./pricing.ts";
import { verifySenderCode } from "./sender-code.ts";
import type { Signer } from "./signer.ts";

export interface AuthorizeRequest {
  projectId: string;
  apiKeyId: number | null;
  user: string;
  target: string;
  selector: string;
  estimatedGas: bigint;
  chainId: number;
  clientNonce: string | null;
  /** factory ‖ factoryData when the operation deploys the sender, "0x" when it is deployed. */
  initCode: Hex;
}

import type { ProjectSponsorTerms } from "./policy.ts";

export type { ProjectSponsorTerms };

export type AuthorizeOutcome =
  | { kind: "authorized"; body: string; replayed: boolean }
  | { kind: "refused"; code: ErrorCode; detail: string; ruleId?: string };

export interface AuthorizeDeps {
  config: Pick<Config, "chains" | "clockSkewSec" | "preVerification">;
  signer: Signer;
  reservations: ReservationBatcher;
  /** The fee ceilings for a chain now, or null without a fresh reading. */
  feeCeilings(chainId: number): FeeCeilings | null;
  projectTerms(projectId: string): Promise<ProjectSponsorTerms>;
  senderCode: SenderCodeResolver;
  /** Decides as the reservation would, writing nothing (ledger.dryRunReservation). */
  dryRun(r: Reservation): Promise<ReserveOutcome>;
  /** The project's approval webhook (webhooks/approval.ts), asked before signing; absent: none. */
  approve?(req: ApprovalRequest): Promise<ApprovalOutcome>;
  now(): number;
}

type Quoted = Extract<Quote, { kind: "quote" }> & {
  senderCodeHash: Hex;
  maxPreVerificationGas: bigint;
  /** Why the sender's code cannot be sponsored; null when it can (sender-code.ts). */
  codeRefusal: Refused | null;
};

/**
 * The price and window of a call authorization now (the chain, the project's TTL, the fee
 * ceilings), then the sender's code: what the authorization binds, or why it cannot be given.
 */
export async function quoteCall(
  deps: Pick<AuthorizeDeps, "config" | "feeCeilings" | "projectTerms" | "senderCode">,
  req: AuthorizeRequest,
  nowMs: number,
): Promise<Quoted | Extract<Quote, { kind: "denied" }>> {
  const chain = deps.config.chains.find((c) => c.chainId === req.chainId);
  const terms = await deps.projectTerms(req.projectId);
  const q = quote({
    chain,
    chainId: req.chainId,
    estimatedGas: req.estimatedGas,
    ttlSec: terms.ttlSec,
    nowMs,
    clockSkewSec: deps.config.clockSkewSec,
    fees: deps.feeCeilings(req.chainId),
  });
  if (q.kind === "denied") return q;
  const verdict = verifySenderCode(
    deps.senderCode,
    {
      chainId: req.chainId,
      entryPoint: chain!.entryPoint,
      sender: req.user as Address,
      initCode: req.initCode,
      eip7702Delegate: null,
    },
    terms.unknownAccounts,
    { kind: "single_execute" },
  );
  // A cached verdict comes back as a value: no await, no extra turn of the event loop.
  const code = verdict instanceof Promise ? await verdict : verdict;
  const maxPreVerificationGas = callPreVerificationCeiling(
    req.initCode,
    PAYMASTER_AND_DATA_SIZE.call,
    deps.config.preVerification,
  );
  return code.kind === "refused"
    ? { ...q, senderCodeHash: ZERO_HASH, maxPreVerificationGas, codeRefusal: refused(code.code, code.detail) }
    : { ...q, senderCodeHash: code.codeHash, maxPreVerificationGas, codeRefusal: null };
}

/**
 * The refusal for a sender whose code cannot be sponsored, after the refusals that need no chain:
 * a call that is not allowlisted is still 403 not_allowlisted, a tank that cannot pay still 402,
 * a policy still names its rule, as INTERFACE.md's rules say, whatever the sender's code. One
 * dry run of the reservation, on the refusal path only.
 */
export async function codeRefusalOf(
  deps: Pick<AuthorizeDeps, "dryRun">,
  req: AuthorizeRequest,
  q: Quoted & { codeRefusal: Refused },
  nowMs: number,
): Promise<Refused> {
  const outcome = await deps.dryRun(callReservation(req, q, nowMs, NO_IDS));
  return callRefusal(outcome) ?? q.codeRefusal;
}

/**
 * The refusal for a call that could not be priced. Without a fee reading (the chain's RPC is
 * down), the refusals that need no price still come first: a call that is not allowlisted is 403
 * not_allowlisted and a blocked sender is refused by its rule, not 503 fee_oracle_stale, which
 * clients retry. One dry run at a cost of 0 wei: what it refuses is refused at any price, since
 * a higher cost only trips more rules.
 */
export async function unpricedRefusalOf(
  deps: Pick<AuthorizeDeps, "dryRun" | "config">,
  req: AuthorizeRequest,
  denied: Extract<Quote, { kind: "denied" }>,
  nowMs: number,
): Promise<Refused> {
  const fallback = refused(denied.code, denied.detail);
  const paymaster = deps.config.chains.find((c) => c.chainId === req.chainId)?.paymaster;
  if (denied.code !== "fee_oracle_stale" || !paymaster) return fallback;
  const nowSec = Math.floor(nowMs / 1000);
  const free = {
    maxGasCostWei: 0n,
    maxFeePerGasWei: 0n,
    maxPriorityFeePerGasWei: 0n,
    paymaster,
    validAfterSec: nowSec,
    validUntilSec: nowSec + 1,
  };
  return callRefusal(await deps.dryRun(callReservation(req, free, nowMs, NO_IDS))) ?? fallback;
}

/** How a call authorization words the refusals that name no rule. */
const CALL_WORDS: RefusalWords = {
  notAllowlisted: () => refused("not_allowlisted", "the target contract and selector are not allowlisted"),
  insufficientBalance: "the gas tank cannot cover maxGasCost",
};

/** What a reservation's outcome refuses, or null when it would reserve (or replay). */
export function callRefusal(outcome: ReserveOutcome): Refused | null {
  return reservationRefusal(outcome, CALL_WORDS);
}

/** The ids of a reservation that is only asked about, never stored. */
export const NO_IDS = {
  authId: ZERO_HASH,
  clientNonce: null,
  requestDigest: null,
  response: null,
} as const satisfies Pick<Reservation, "authId" | "clientNonce" | "requestDigest" | "response">;

/** The reservation of a call authorization priced by `q` (authorize and its dry run share it). */
export function callReservation(
  req: AuthorizeRequest,
  q: Pick<
    Quoted,
    | "maxGasCostWei"
    | "maxFeePerGasWei"
    | "maxPriorityFeePerGasWei"
    | "paymaster"
    | "validAfterSec"
    | "validUntilSec"
  >,
  nowMs: number,
  ids: Pick<Reservation, "authId" | "clientNonce" | "requestDigest" | "response">,
): Reservation {
  // Every field named, in one order: the object has one shape on the hot path. The spread of
  // `ids` it replaces was 2.5 % of the service's CPU samples under the bench (self time); the
  // throughput change is within the machine's noise (bench/results-2026-11-27-call-reservation.txt).
  return {
    authId: ids.authId,
    clientNonce: ids.clientNonce,
    requestDigest: ids.requestDigest,
    response: ids.response,
    projectId: req.projectId,
    apiKeyId: req.apiKeyId,
    chainId: req.chainId,
    sender: req.user.toLowerCase(),
    target: req.target.toLowerCase(),
    selector: req.selector.toLowerCase(),
    estimatedGas: req.estimatedGas,
    maxGasCostWei: q.maxGasCostWei,
    maxFeePerGasWei: q.maxFeePerGasWei,
    maxPriorityFeePerGasWei: q.maxPriorityFeePerGasWei,
    paymaster: q.paymaster.toLowerCase(),
    validAfterSec: q.validAfterSec,
    validUntilSec: q.validUntilSec,
    requestedAtMs: nowMs,
  };
}

export async function authorize(deps: AuthorizeDeps, req: AuthorizeRequest): Promise<AuthorizeOutcome> {
  const nowMs = deps.now();
  const q = await quoteCall(deps, req, nowMs);
  if (q.kind === "denied") return unpricedRefusalOf(deps, req, q, nowMs);
  if (q.codeRefusal) return codeRefusalOf(deps, req, { ...q, codeRefusal: q.codeRefusal }, nowMs);
  const approval = await deps.approve?.({
    projectId: req.projectId,
    mode: "call",
    chainId: req.chainId,
    sender: req.user.toLowerCase(),
    calls: [{ target: req.target.toLowerCase(), selector: req.selector.toLowerCase() }],
    maxGasCostWei: q.maxGasCostWei,
    maxTotalGas: q.maxTotalGas,
    clientNonce: req.clientNonce,
  });
  if (approval?.kind === "refused") return refused(approval.code, approval.detail);

  const sponsorship: CallAuthorization = {
    sender: req.user.toLowerCase() as Address,
    senderCodeHash: q.senderCodeHash,
    initCode: req.initCode,
    target: req.target.toLowerCase() as Address,
    selector: req.selector.toLowerCase() as Hex,
    maxTotalGas: q.maxTotalGas,
    maxPreVerificationGas: q.maxPreVerificationGas,
    maxFeePerGasWei: q.maxFeePerGasWei,
    maxPriorityFeePerGasWei: q.maxPriorityFeePerGasWei,
    validUntilSec: q.validUntilSec,
    validAfterSec: q.validAfterSec,
    authId: randomAuthId(),
  };
  const domain = { chainId: req.chainId, paymaster: q.paymaster };
  const signature = deps.signer.signDigest(callSponsorshipDigest(domain, PAYMASTER_GAS_LIMITS, sponsorship));
  const paymasterAndData = encodeCallPaymasterAndData(domain, PAYMASTER_GAS_LIMITS, sponsorship, signature);
  const body = responseBody(q, paymasterAndData, signature, sponsorship.authId);
  const requestDigest = req.clientNonce ? digestOf(req) : null;

  const outcome = await deps.reservations.reserve(
    callReservation(req, q, nowMs, {
      authId: sponsorship.authId,
      clientNonce: req.clientNonce,
      requestDigest,
      response: req.clientNonce ? body : null,
    }),
  );
  switch (outcome.kind) {
    case "reserved":
      return { kind: "authorized", body, replayed: false };
    case "replay":
      if (outcome.requestDigest !== requestDigest || outcome.response === null) {
        return refused(
          "idempotency_key_reused",
          "this clientNonce was already used with a different request",
        );
      }
      return { kind: "authorized", body: outcome.response, replayed: true };
    default:
      return callRefusal(outcome)!;
  }
}

type Refused = Extract<AuthorizeOutcome, { kind: "refused" }>;

function refused(code: ErrorCode, detail: string): Refused {
  return { kind: "refused", code, detail };
}

/**
 * The 200 body, serialised by hand in a fixed order so that an idempotent replay is
 * byte-identical. The first five fields are INTERFACE.md's; the rest is what a client must
 * respect to build an operation the paymaster accepts.
 */
function responseBody(q: Quoted, paymasterAndData: Hex, signature: Hex, authId: Hex): string {
  return JSON.stringify({
    authorized: true,
    paymasterAndData,
    signature,
    validUntil: q.validUntilSec,
    validAfter: q.validAfterSec,
    paymaster: q.paymaster,
    paymasterData: `0x${paymasterAndData.slice(2 + PAYMASTER_DATA_OFFSET * 2)}`,
    paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit.toString(),
    paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit.toString(),
    maxGasCost: q.maxGasCostWei.toString(),
    authorizationId: authId,
    maxTotalGas: q.maxTotalGas.toString(),
    maxFeePerGas: q.maxFeePerGasWei.toString(),
    maxPriorityFeePerGas: q.maxPriorityFeePerGasWei.toString(),
    maxPreVerificationGas: q.maxPreVerificationGas.toString(),
    senderCodeHash: q.senderCodeHash,
  });
}

/** What makes two requests with the same clientNonce the same request. */
function digestOf(req: AuthorizeRequest): string {
  const parts = [
    req.projectId,
    req.user,
    req.target,
    req.selector,
    req.estimatedGas,
    req.chainId,
    req.initCode,
  ];
  return hash("sha256", parts.map((p) => String(p).toLowerCase()).join("|"), "hex");
}
