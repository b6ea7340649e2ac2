/**
 * Sponsorship policies (issue 11): what a rule is, and whether a rule sent by a client makes
 * sense for its kind and beside the project's other rules. Pure: no I/O, no clock. The rules are
 * enforced in SQL, inside the reservation (db/functions/reserve_sponsorships.sql); this module decides
 * only what may be stored.
 */
import { getAddress, isAddress } from "viem";
import { DAILY_CAP_RULE_ID } from "../ledger/ledger.ts";
import { POLICY_KINDS, RULE_KINDS, type RuleKind } from "./kinds.ts";

export { RULE_KINDS, type RuleKind } from "./kinds.ts";

export const WINDOWS = ["day", "week", "month", "interval", "lifetime"] as const;
export type Window = (typeof WINDOWS)[number];

/** Bounds: rules per project, senders per list, and the length of an interval window. */
export const MAX_RULES_PER_PROJECT = 32;
export const MAX_SENDERS_PER_LIST = 1000;
export const MIN_WINDOW_SEC = 60;
export const MAX_WINDOW_SEC = 366 * 86_400;
/** The largest count cap: far above any real campaign, well inside a bigint column. */
export const MAX_OPERATIONS = 1_000_000_000;

export const RULE_ID_PATTERN = "^[a-z0-9_-]{1,64}$";

export interface PolicyRule {
  id: string;
  kind: RuleKind;
  maxWei: bigint | null;
  maxOperations: number | null;
  window: Window | null;
  windowSeconds: number | null;
  startsAt: Date | null;
  endsAt: Date | null;
  senders: string[] | null;
}

/** A rule as the API receives it (PUT /projects/:id/policies/:ruleId); shape already checked. */
export interface RuleInput {
  kind: RuleKind;
  maxWei?: string;
  maxOperations?: number;
  window?: Window;
  windowSeconds?: number;
  startsAt?: string;
  endsAt?: string;
  senders?: string[];
}

export type Parsed = { kind: "ok"; rule: PolicyRule } | { kind: "invalid"; detail: string };

/** What each cap counts (wei or operations); the kinds that are not caps are absent. */
const CAPS: Partial<Record<RuleKind, "wei" | "operations">> = Object.fromEntries(
  RULE_KINDS.flatMap((k) => (POLICY_KINDS[k].counts ? [[k, POLICY_KINDS[k].counts]] : [])),
);

/** Which request fields each kind takes; any other field is refused, so nothing is ignored. */
const FIELDS = (kind: RuleKind): readonly (keyof RuleInput)[] => POLICY_KINDS[kind].fields;

/**
 * Checks one rule against its kind and the project's other rules (`others` excludes the rule
 * being replaced). At most one campaign, operation cost cap, sender allowlist and blocklist; caps
 * of one kind may differ only by window (a daily and a lifetime sender count cap, say).
 */
export function parseRule(id: string, input: RuleInput, others: PolicyRule[]): Parsed {
  if (id === DAILY_CAP_RULE_ID) {
    return invalid(`'${DAILY_CAP_RULE_ID}' is the project's dailyCap; change it with PATCH /projects/:id`);
  }
  const stray = Object.keys(input).filter(
    (f) => f !== "kind" && !FIELDS(input.kind).includes(f as keyof RuleInput),
  );
  if (stray.length > 0) return invalid(`a ${input.kind} rule does not take ${stray.join(", ")}`);
  const shaped = shapeOf(id, input);
  if (shaped.kind === "invalid") return shaped;
  const rule = shaped.rule;
  if (others.length + 1 > MAX_RULES_PER_PROJECT) {
    return invalid(`a project holds at most ${MAX_RULES_PER_PROJECT} policy rules`);
  }
  const twin = others.find((o) => o.kind === rule.kind && sameWindow(o, rule));
  if (twin) {
    return invalid(
      CAPS[rule.kind]
        ? `rule '${twin.id}' is already a ${rule.kind} over the same window; change it instead`
        : `rule '${twin.id}' is already the project's ${rule.kind}; a project has one`,
    );
  }
  return shaped;
}

function shapeOf(id: string, input: RuleInput): Parsed {
  const rule: PolicyRule = {
    id,
    kind: input.kind,
    maxWei: null,
    maxOperations: null,
    window: null,
    windowSeconds: null,
    startsAt: null,
    endsAt: null,
    senders: null,
  };
  const cap = CAPS[input.kind];
  if (cap || input.kind === "operation_cost_cap") {
    if (cap === "operations") {
      if (input.maxOperations === undefined) return invalid(`a ${input.kind} needs maxOperations`);
      rule.maxOperations = input.maxOperations;
    } else {
      if (input.maxWei === undefined) return invalid(`a ${input.kind} needs maxWei`);
      rule.maxWei = BigInt(input.maxWei);
      if (rule.maxWei === 0n) return invalid("maxWei must be above 0 (to stop sponsoring, use a campaign)");
    }
  }
  if (cap) {
    const window = windowOf(input);
    if (typeof window === "string") return invalid(window);
    rule.window = window.window;
    rule.windowSeconds = window.seconds;
  }
  if (input.kind === "campaign") {
    rule.startsAt = input.startsAt === undefined ? null : new Date(input.startsAt);
    rule.endsAt = input.endsAt === undefined ? null : new Date(input.endsAt);
    if (!rule.startsAt && !rule.endsAt) return invalid("a campaign needs startsAt, endsAt or both");
    if (rule.startsAt && rule.endsAt && rule.startsAt >= rule.endsAt) {
      return invalid("a campaign's startsAt must be before its endsAt");
    }
  }
  if (input.kind === "sender_allowlist" || input.kind === "sender_blocklist") {
    const senders = sendersOf(input.senders);
    if (typeof senders === "string") return invalid(senders);
    rule.senders = senders;
  }
  return { kind: "ok", rule };
}

function windowOf(input: RuleInput): { window: Window; seconds: number | null } | string {
  if (input.window === undefined) return `a ${input.kind} needs a window (${WINDOWS.join(", ")})`;
  if (input.window !== "interval") {
    return input.windowSeconds === undefined
      ? { window: input.window, seconds: null }
      : "windowSeconds goes only with window 'interval'";
  }
  const s = input.windowSeconds;
  if (s === undefined || s < MIN_WINDOW_SEC || s > MAX_WINDOW_SEC) {
    return `window 'interval' needs windowSeconds between ${MIN_WINDOW_SEC} and ${MAX_WINDOW_SEC}`;
  }
  return { window: "interval", seconds: s };
}

function sendersOf(list: string[] | undefined): string[] | string {
  if (!list || list.length === 0) return "a sender list needs at least one address in senders";
  if (list.length > MAX_SENDERS_PER_LIST)
    return `a sender list holds at most ${MAX_SENDERS_PER_LIST} addresses`;
  const out = new Set<string>();
  for (const [i, a] of list.entries()) {
    const hex = a.slice(2);
    // A mixed-case address must carry a valid EIP-55 checksum, as on the allowlist.
    const mixed = hex !== hex.toLowerCase() && hex !== hex.toUpperCase();
    if (mixed && (!isAddress(a, { strict: true }) || getAddress(a) !== a)) {
      return `senders[${i}] fails its EIP-55 checksum`;
    }
    const lower = a.toLowerCase();
    if (out.has(lower)) return `senders[${i}] repeats an address`;
    out.add(lower);
  }
  return [...out];
}

function sameWindow(a: PolicyRule, b: PolicyRule): boolean {
  return a.window === b.window && a.windowSeconds === b.windowSeconds;
}

function invalid(detail: string): Parsed {
  return { kind: "invalid", detail };
}
