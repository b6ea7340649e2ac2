import type { Queryable } from "../db/db.ts";
import { DAILY_CAP_RULE_ID } from "../ledger/ledger.ts";
import { type PolicyRule, parseRule, type RuleInput, type RuleKind, type Window } from "./rules.ts";

/**
 * The `policy_rules` table (migrations/008_policies.sql): this module is its one writer. The
 * reservation reads it in SQL.
 */

/** A rule as the API shows it (snake_case, like every record; wei as decimal strings). */
export interface RuleRecord {
  id: string;
  /** The studio's name for it; null when none was given. */
  name: string | null;
  /** A paused rule keeps its settings and counters and refuses nothing until resumed. */
  paused: boolean;
  kind: RuleKind;
  /** The chain the rule applies on; null: every chain, each counted apart (migration 038). */
  chain_id: number | null;
  max_wei: string | null;
  max_operations: number | null;
  window: Window | null;
  window_seconds: number | null;
  starts_at: string | null;
  ends_at: string | null;
  senders: string[] | null;
  /** The daily cap is shown as the rule it is, but changed with PATCH /projects/:id. */
  builtin: boolean;
  created_at: string;
  updated_at: string;
}

interface Row {
  id: string;
  name: string | null;
  paused: boolean;
  kind: RuleKind;
  chain_id: number | null;
  max_wei: string | null;
  max_operations: number | null;
  window_kind: Window | null;
  window_seconds: number | null;
  starts_at: Date | null;
  ends_at: Date | null;
  senders: string[] | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, name, paused, kind, chain_id, max_wei::text AS max_wei, max_operations, window_kind, window_seconds, starts_at,
  ends_at, senders, created_at, updated_at`;

/** The project's rules, the daily cap first when it is set; null when the project does not exist. */
export async function listRules(db: Queryable, projectId: string): Promise<RuleRecord[] | null> {
  const [project] = await db.query<{ cap: string | null; created_at: Date }>(
    "SELECT daily_cap::text AS cap, created_at FROM projects WHERE id = $1",
    [projectId],
  );
  if (!project) return null;
  const rows = await db.query<Row>(`SELECT ${COLUMNS} FROM policy_rules WHERE project_id = $1 ORDER BY id`, [
    projectId,
  ]);
  const daily: RuleRecord[] =
    project.cap === null
      ? []
      : [
          {
            id: DAILY_CAP_RULE_ID,
            name: "Daily cap",
            paused: false,
            kind: "project_spend_cap",
            chain_id: null,
            max_wei: project.cap,
            max_operations: null,
            window: "day",
            window_seconds: null,
            starts_at: null,
            ends_at: null,
            senders: null,
            builtin: true,
            created_at: project.created_at.toISOString(),
            updated_at: project.created_at.toISOString(),
          },
        ];
  return [...daily, ...rows.map(toRecord)];
}

export type PutResult =
  | { kind: "stored"; rule: RuleRecord; created: boolean }
  | { kind: "invalid"; detail: string }
  | { kind: "no_project" };

/**
 * Creates or replaces a rule, inside the caller's transaction. The project's row is locked, so
 * concurrent changes are checked one after the other against the bound and for duplicates. A
 * replaced rule keeps its usage counters: raising a cap in the middle of a day keeps what the
 * day has counted.
 */
export async function putRule(
  tx: Queryable,
  projectId: string,
  ruleId: string,
  {
    name = null,
    paused = false,
    chainId = null,
    ...input
  }: RuleInput & { name?: string | null; paused?: boolean; chainId?: number | null },
): Promise<PutResult> {
  const locked = await tx.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  if (locked.length === 0) return { kind: "no_project" };
  const rows = await tx.query<Row>(`SELECT ${COLUMNS} FROM policy_rules WHERE project_id = $1`, [projectId]);
  const others = rows.filter((r) => r.id !== ruleId).map(toRule);
  const parsed = parseRule(ruleId, input, others);
  if (parsed.kind === "invalid") return parsed;
  const r = parsed.rule;
  const created = rows.length === others.length;
  const [stored] = await tx.query<Row>(
    `INSERT INTO policy_rules AS p (project_id, id, kind, max_wei, max_operations, window_kind,
       window_seconds, starts_at, ends_at, senders, name, paused, chain_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (project_id, id) DO UPDATE SET kind = EXCLUDED.kind, max_wei = EXCLUDED.max_wei,
       max_operations = EXCLUDED.max_operations, window_kind = EXCLUDED.window_kind,
       window_seconds = EXCLUDED.window_seconds, starts_at = EXCLUDED.starts_at,
       ends_at = EXCLUDED.ends_at, senders = EXCLUDED.senders, name = EXCLUDED.name,
       paused = EXCLUDED.paused, chain_id = EXCLUDED.chain_id, updated_at = now()
     RETURNING ${COLUMNS}`,
    [
      projectId,
      r.id,
      r.kind,
      r.maxWei?.toString() ?? null,
      r.maxOperations,
      r.window,
      r.windowSeconds,
      r.startsAt,
      r.endsAt,
      r.senders,
      name,
      paused,
      chainId,
    ],
  );
  return { kind: "stored", rule: toRecord(stored!), created };
}

/**
 * Renames, pauses or resumes a rule without touching its settings or counters; null when the
 * project has no such rule. A `name` of null removes the name; an absent field is left alone.
 */
export async function patchRule(
  db: Queryable,
  projectId: string,
  ruleId: string,
  change: { name?: string | null; paused?: boolean },
): Promise<RuleRecord | null> {
  const rows = await db.query<Row>(
    `UPDATE policy_rules SET name = CASE WHEN $3::boolean THEN $4::text ELSE name END,
       paused = COALESCE($5::boolean, paused),
       updated_at = now()
     WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, ruleId, change.name !== undefined, change.name ?? null, change.paused ?? null],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Removes a rule and its usage counters; null when there was none. */
export async function deleteRule(
  db: Queryable,
  projectId: string,
  ruleId: string,
): Promise<RuleRecord | null> {
  const rows = await db.query<Row>(
    `DELETE FROM policy_rules WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, ruleId],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

export interface UsageRecord {
  subject: string;
  /** The chain counted: a rule's counters are kept per chain. */
  chain_id: number;
  window_start: string;
  spent_wei: string;
  operations: number;
  reached_at: string | null;
}

/** The rule's counters in its current window (per sender, or '*' for the project), largest first. */
export async function ruleUsage(
  db: Queryable,
  projectId: string,
  ruleId: string,
  nowMs: number,
  limit: number,
): Promise<UsageRecord[] | null> {
  const rule = await db.query<{ window_kind: string | null }>(
    "SELECT window_kind FROM policy_rules WHERE project_id = $1 AND id = $2",
    [projectId, ruleId],
  );
  if (!rule[0]) return null;
  const rows = await db.query<{
    subject: string;
    chain_id: number;
    window_start: Date;
    spent: string;
    ops: number;
    reached_at: Date | null;
  }>(
    `SELECT u.subject, u.chain_id, u.window_start, u.spent::text AS spent, u.ops, u.reached_at
     FROM policy_usage u JOIN policy_rules r ON r.project_id = u.project_id AND r.id = u.rule_id
     WHERE u.project_id = $1 AND u.rule_id = $2
       AND u.window_start = policy_window_start(r.window_kind, r.window_seconds, $3)
     ORDER BY u.ops DESC, u.spent DESC, u.subject, u.chain_id LIMIT $4`,
    [projectId, ruleId, new Date(nowMs), limit],
  );
  return rows.map((u) => ({
    subject: u.subject,
    chain_id: u.chain_id,
    window_start: u.window_start.toISOString(),
    spent_wei: u.spent,
    operations: Number(u.ops),
    reached_at: u.reached_at?.toISOString() ?? null,
  }));
}

function toRule(r: Row): PolicyRule {
  return {
    id: r.id,
    kind: r.kind,
    maxWei: r.max_wei === null ? null : BigInt(r.max_wei),
    maxOperations: r.max_operations === null ? null : Number(r.max_operations),
    window: r.window_kind,
    windowSeconds: r.window_seconds,
    startsAt: r.starts_at,
    endsAt: r.ends_at,
    senders: r.senders,
  };
}

function toRecord(r: Row): RuleRecord {
  return {
    id: r.id,
    name: r.name,
    paused: r.paused,
    kind: r.kind,
    chain_id: r.chain_id,
    max_wei: r.max_wei,
    max_operations: r.max_operations === null ? null : Number(r.max_operations),
    window: r.window_kind,
    window_seconds: r.window_seconds,
    starts_at: r.starts_at?.toISOString() ?? null,
    ends_at: r.ends_at?.toISOString() ?? null,
    senders: r.senders,
    builtin: false,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}
