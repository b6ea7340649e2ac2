import type { ErrorCode } from "../http/catalogue.ts";
import type { ReserveOutcome } from "../ledger/ledger.ts";
import { refusalDetail } from "./kinds.ts";

/** A refusal by one of the project's rules, as both authorize paths and the dry run answer it. */
export interface RuleRefusal {
  kind: "refused";
  code: ErrorCode;
  detail: string;
  ruleId: string;
}

/** The refusal for a reservation outcome that names a rule; null for any other outcome. */
export function ruleRefusal(outcome: ReserveOutcome): RuleRefusal | null {
  if (!("ruleId" in outcome)) return null;
  return {
    kind: "refused",
    code: outcome.kind,
    detail: `${refusalDetail(outcome.kind)} (rule ${outcome.ruleId})`,
    ruleId: outcome.ruleId,
  };
}

/** A refusal of a reservation, in the mode's words (a call authorization, or an operation). */
export interface ReservationRefusal {
  kind: "refused";
  code: ErrorCode;
  detail: string;
  ruleId?: string;
  callIndex?: number;
}

/** How a mode words the two refusals that name no rule. */
export interface RefusalWords {
  notAllowlisted(callIndex: number): ReservationRefusal;
  insufficientBalance: string;
}

/**
 * The one reading of a reservation's outcome, for authorize, its dry run and ERC-7677 alike: null
 * when it reserves (or replays), else the refusal — the allowlist, the tank, or the rule that
 * refused (the daily cap is one), in that order of the reservation function's own checks.
 */
export function reservationRefusal(outcome: ReserveOutcome, words: RefusalWords): ReservationRefusal | null {
  switch (outcome.kind) {
    case "reserved":
    case "replay":
      return null;
    case "not_allowlisted":
      return words.notAllowlisted(outcome.callIndex);
    case "insufficient_balance":
      return { kind: "refused", code: "insufficient_balance", detail: words.insufficientBalance };
    default:
      return ruleRefusal(outcome);
  }
}
