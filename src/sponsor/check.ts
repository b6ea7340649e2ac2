/**
 * The dry run behind `POST /sponsor/check`: "would this authorization be granted now, and if
 * not, which rule refuses it?". It prices the request as authorize does (policy.ts) and asks the
 * reservation's own SQL in its dry mode (ledger.dryRunReservation), so the answer comes from the
 * same rules on the same data. Nothing is signed, reserved, counted or locked; a concurrent
 * authorization may of course take what the dry run saw as free.
 */
import type { SenderCodeResolver } from "../accounts/code/resolve.ts";
import type { Config } from "../config.ts";
import type { ErrorCode } from "../http/catalogue.ts";
import type { Reservation, ReserveOutcome } from "../ledger/ledger.ts";
import {
  type AuthorizeRequest,
  callRefusal,
  callReservation,
  NO_IDS,
  type ProjectSponsorTerms,
  quoteCall,
  unpricedRefusalOf,
} from "./authorize.ts";
import type { FeeCeilings } from "./pricing.ts";

export type CheckOutcome =
  | { kind: "would_sponsor"; maxGasCostWei: bigint }
  | { kind: "would_refuse"; code: ErrorCode; detail: string; ruleId: string | null };

export interface CheckDeps {
  config: Pick<Config, "chains" | "clockSkewSec" | "preVerification">;
  feeCeilings(chainId: number): FeeCeilings | null;
  projectTerms(projectId: string): Promise<ProjectSponsorTerms>;
  senderCode: SenderCodeResolver;
  dryRun(r: Reservation): Promise<ReserveOutcome>;
  now(): number;
}

export async function checkAuthorization(deps: CheckDeps, req: AuthorizeRequest): Promise<CheckOutcome> {
  const nowMs = deps.now();
  const q = await quoteCall(deps, req, nowMs);
  if (q.kind === "denied") {
    const refusal = await unpricedRefusalOf(deps, req, q, nowMs);
    return {
      kind: "would_refuse",
      code: refusal.code,
      detail: refusal.detail,
      ruleId: refusal.ruleId ?? null,
    };
  }
  // The same order as authorize: the reservation's refusals first, then the sender's code.
  const refusal = callRefusal(await deps.dryRun(callReservation(req, q, nowMs, NO_IDS))) ?? q.codeRefusal;
  if (!refusal) return { kind: "would_sponsor", maxGasCostWei: q.maxGasCostWei };
  return { kind: "would_refuse", code: refusal.code, detail: refusal.detail, ruleId: refusal.ruleId ?? null };
}
