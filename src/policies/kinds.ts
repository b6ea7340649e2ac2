/**
 * The registry of policy rule kinds: for each kind, its label, the request fields it takes, what
 * a cap counts, and the refusal it answers (code and detail). The rest derives from it: the kinds
 * and fields rules.ts accepts, the refusal details of refusals.ts, the refusal codes the OpenAPI
 * document lists, and `GET /policies/kinds`, from which the dashboard builds its form. The rules
 * are enforced in SQL (db/functions/reserve_sponsorships.sql); test/policy-kinds.test.ts holds
 * the SQL, the error catalogue and the README to this file.
 *
 * Adding a kind: an entry here, its check in reserve_sponsorships.sql, a migration that admits it
 * in policy_rules' CHECK constraint, and its line in the README.
 */
import type { ErrorCode } from "../http/catalogue.ts";

/** A field of a rule as the API receives it (PUT /projects/:id/policies/:ruleId). */
export type RuleField =
  | "maxWei"
  | "maxOperations"
  | "window"
  | "windowSeconds"
  | "startsAt"
  | "endsAt"
  | "senders";

export interface PolicyKind {
  label: string;
  /** The request fields the kind takes; any other is refused, so nothing is ignored. */
  fields: readonly RuleField[];
  /** What a cap counts in its window; null for a kind that is not a cap. */
  counts: "wei" | "operations" | null;
  /** The refusal when this kind stops an operation. */
  refusal: { code: ErrorCode; detail: string };
}

const windowed = ["window", "windowSeconds"] as const;

export const POLICY_KINDS = {
  sender_spend_cap: {
    label: "Spend cap per sender",
    fields: ["maxWei", ...windowed],
    counts: "wei",
    refusal: {
      code: "sender_cap_exceeded",
      detail: "the sender has reached a per-sender cap for the current window",
    },
  },
  sender_count_cap: {
    label: "Operations cap per sender",
    fields: ["maxOperations", ...windowed],
    counts: "operations",
    refusal: {
      code: "sender_cap_exceeded",
      detail: "the sender has reached a per-sender cap for the current window",
    },
  },
  project_spend_cap: {
    label: "Spend cap for the project",
    fields: ["maxWei", ...windowed],
    counts: "wei",
    refusal: {
      code: "project_cap_exceeded",
      detail: "this sponsorship would exceed a project-wide cap for the current window",
    },
  },
  project_count_cap: {
    label: "Operations cap for the project",
    fields: ["maxOperations", ...windowed],
    counts: "operations",
    refusal: {
      code: "project_cap_exceeded",
      detail: "this sponsorship would exceed a project-wide cap for the current window",
    },
  },
  operation_cost_cap: {
    label: "Cost cap per operation",
    fields: ["maxWei"],
    counts: null,
    refusal: {
      code: "operation_cost_exceeded",
      detail: "the operation's maximum cost is above the project's per-operation cap",
    },
  },
  campaign: {
    label: "Campaign window",
    fields: ["startsAt", "endsAt"],
    counts: null,
    refusal: { code: "campaign_not_active", detail: "the project's campaign is not running now" },
  },
  sender_allowlist: {
    label: "Sender allowlist",
    fields: ["senders"],
    counts: null,
    refusal: { code: "sender_not_allowed", detail: "the sender is not on the project's sender allowlist" },
  },
  sender_blocklist: {
    label: "Sender blocklist",
    fields: ["senders"],
    counts: null,
    refusal: { code: "sender_blocked", detail: "the sender is on the project's sender blocklist" },
  },
} as const satisfies Record<string, PolicyKind>;

export type RuleKind = keyof typeof POLICY_KINDS;
export const RULE_KINDS = Object.keys(POLICY_KINDS) as RuleKind[];

/** The project's daily cap, which refuses like a rule (its ruleId is `daily_cap`). */
export const DAILY_CAP_REFUSAL = {
  code: "daily_cap_exceeded",
  detail: "this sponsorship would exceed the project's daily cap",
} as const satisfies PolicyKind["refusal"];

/** Every code a policy rule refuses with, each once (the daily cap's is not among them). */
export const POLICY_REFUSAL_CODES: readonly ErrorCode[] = [
  ...new Set<ErrorCode>(RULE_KINDS.map((k) => POLICY_KINDS[k].refusal.code)),
];

/** The detail of a refusal code (the kinds that share a code share its detail). */
export function refusalDetail(code: ErrorCode): string | undefined {
  if (code === DAILY_CAP_REFUSAL.code) return DAILY_CAP_REFUSAL.detail;
  return RULE_KINDS.map((k) => POLICY_KINDS[k].refusal).find((r) => r.code === code)?.detail;
}
