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
import { ruleRefusal } from "../policies/refusals.ts";
import { type AuthorizeRequest, callReservation, type ProjectSponsorTerms, quoteCall } from "./authorize.ts";
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
  if (q.kind === "refused") return { kind: "would_refuse", code: q.code, detail: q.detail, ruleId: null };
  if (q.kind === "denied") return { kind: "would_refuse", code: q.code, detail: q.detail, ruleId: null };
  const outcome = await deps.dryRun(
    callReservation(req, q, nowMs, {
      authId: `0x${"0".repeat(64)}`,
      clientNonce: null,
      requestDigest: null,
      response: null,
    }),
  );
  switch (outcome.kind) {
    case "reserved":
    case "replay":
      return { kind: "would_sponsor", maxGasCostWei: q.maxGasCostWei };
    case "not_allowlisted":
      return refusal("not_allowlisted", "the target contract and selector are not allowlisted");
    case "insufficient_balance":
      return refusal("insufficient_balance", "the gas tank cannot cover maxGasCost");
    default: {
      const r = ruleRefusal(outcome)!;
      return { kind: "would_refuse", code: r.code, detail: r.detail, ruleId: r.ruleId };
    }
  }
}

function refusal(code: ErrorCode, detail: string): CheckOutcome {
  return { kind: "would_refuse", code, detail, ruleId: null };
}
