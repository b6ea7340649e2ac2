import assert from "node:assert/strict";
import { authIdKey, bytes, projectIdsAbove } from "../db/bytes.ts";
import type { Db, Queryable } from "../db/db.ts";

/**
 * The gas tank ledger (DESIGN.md §2). Every movement is an append-only entry with a unique
 * reference, on one chain, and that chain's cached tank (`projects.gas_tank_balance` for the
 * project's home chain, a `gas_tanks` row for another; migration 035) moves in the same
 * transaction, so the two always agree, nothing is applied twice, and nothing moves value between
 * chains. Amounts are the chain's smallest unit (wei) as bigint.
 */

/**
 * SQL: the sum of every project's tank on the chain given as $1 (the project_tanks view of
 * migration 041: the home chain's tanks are projects' rows, the others gas_tanks rows).
 */
export const TANKS_ON_CHAIN_SQL = "COALESCE((SELECT sum(balance) FROM project_tanks WHERE chain_id = $1), 0)";

/**
 * SQL: the balance of the tank on chain `chain` (an SQL expression) of the project row `p`: the
 * project's own column for its home chain, its gas_tanks row for any other (0 when it has none).
 */
export function tankBalanceSql(p: string, chain: string): string {
  return `(CASE WHEN ${p}.home_chain_id = ${chain} THEN ${p}.gas_tank_balance
    ELSE COALESCE((SELECT t.balance FROM gas_tanks t WHERE t.project_id = ${p}.id AND t.chain_id = ${chain}), 0) END)`;
}

export interface Reservation {
  projectId: string;
  clientNonce: string | null;
  requestDigest: string | null;
  authId: string;
  apiKeyId: number | null;
  chainId: number;
  sender: string;
  target: string;
  selector: string;
  estimatedGas: bigint;
  maxGasCostWei: bigint;
  /** The fee ceilings the signed authorization binds (v2). */
  maxFeePerGasWei: bigint;
  maxPriorityFeePerGasWei: bigint;
  /** The paymaster the authorization was signed for. */
  paymaster: string;
  validAfterSec: number;
  validUntilSec: number;
  /** The exact response body, kept for idempotent replays when a nonce is given. */
  response: string | null;
  /** The service's clock when authorize decided (ms); the reservation's time. */
  requestedAtMs: number;
  /**
   * A whole-operation authorization (ERC-7677) lists every call of the operation, each of which
   * must be allowlisted; `target`/`selector` are then its first call. Absent: a call authorization.
   */
  calls?: { target: string; selector: string }[];
}

export type ReserveOutcome =
  | { kind: "reserved" }
  | { kind: "replay"; requestDigest: string | null; response: string | null }
  | { kind: "not_allowlisted"; callIndex: number }
  | { kind: "insufficient_balance" }
  | { kind: "daily_cap_exceeded"; ruleId: typeof DAILY_CAP_RULE_ID }
  | { kind: PolicyRefusal; ruleId: string };

/** The refusals of the project's policies (db/functions/reserve_sponsorships.sql), each naming its rule. */
export const POLICY_REFUSALS = [
  "sender_blocked",
  "sender_not_allowed",
  "campaign_not_active",
  "operation_cost_exceeded",
  "sender_cap_exceeded",
  "project_cap_exceeded",
] as const;
export type PolicyRefusal = (typeof POLICY_REFUSALS)[number];

/** The daily cap (`dailyCap`) is the project-wide spend cap per UTC day; refusals name it so. */
export const DAILY_CAP_RULE_ID = "daily_cap";

/**
 * Reserves for several authorizations of one project in a single statement, each decided on its
 * own (see db/functions/reserve_sponsorships.sql). Outcomes come back in the order of `items`.
 */
export async function reserveMany(
  db: Queryable,
  projectId: string,
  items: Reservation[],
  { dryRun = false }: { dryRun?: boolean } = {},
): Promise<ReserveOutcome[]> {
  // A batch is decided at one instant: the latest of its items' clocks.
  const nowMs = Math.max(...items.map((r) => r.requestedAtMs));
  for (const r of items) {
    assert.equal(r.projectId, projectId, "a batch holds one project");
    assert.equal(r.chainId, items[0]!.chainId, "a batch holds one chain");
    assert.ok(r.maxGasCostWei >= 0n, "maxGasCost must not be negative");
    assert.ok(r.validUntilSec > r.validAfterSec, "validUntil must be after validAfter");
    assert.ok(r.maxPriorityFeePerGasWei <= r.maxFeePerGasWei, "priority fee ceiling above the fee ceiling");
  }
  const payload = items.map((r, idx) => ({
    idx,
    nonce: r.clientNonce,
    digest: r.requestDigest,
    auth_id: r.authId,
    key_id: r.apiKeyId,
    chain_id: r.chainId,
    sender: r.sender,
    target: r.target,
    selector: r.selector,
    gas: r.estimatedGas.toString(),
    cost: r.maxGasCostWei.toString(),
    max_fee: r.maxFeePerGasWei.toString(),
    max_priority_fee: r.maxPriorityFeePerGasWei.toString(),
    paymaster: r.paymaster,
    valid_after: r.validAfterSec,
    valid_until: r.validUntilSec,
    response: r.response,
    mode: r.calls ? "operation" : "call",
    calls: r.calls ?? null,
  }));
  const rows = await db.query<{
    idx: number;
    outcome: string;
    stored_digest: string | null;
    stored_response: string | null;
    call_index: number | null;
    refused_by: string | null;
  }>(
    "SELECT idx, outcome, stored_digest, stored_response, call_index, refused_by FROM reserve_sponsorships($1, $2::jsonb, $3, $4)",
    [projectId, JSON.stringify(payload), new Date(nowMs), dryRun],
    "reserve-sponsorships",
  );
  const outcomes: ReserveOutcome[] = new Array(items.length);
  for (const row of rows) outcomes[row.idx] = outcomeOf(row);
  assert.ok(outcomes.every(Boolean), "every reservation gets an outcome");
  return outcomes;
}

function outcomeOf(row: {
  outcome: string;
  stored_digest: string | null;
  stored_response: string | null;
  call_index: number | null;
  refused_by: string | null;
}): ReserveOutcome {
  switch (row.outcome) {
    case "replay":
      return { kind: "replay", requestDigest: row.stored_digest, response: row.stored_response };
    case "not_allowlisted":
      return { kind: "not_allowlisted", callIndex: row.call_index ?? 0 };
    case "reserved":
    case "insufficient_balance":
      return { kind: row.outcome };
    case "daily_cap_exceeded":
      return { kind: "daily_cap_exceeded", ruleId: DAILY_CAP_RULE_ID };
  }
  const refusal = POLICY_REFUSALS.find((k) => k === row.outcome);
  assert.ok(refusal && row.refused_by, `unknown reservation outcome ${row.outcome}`);
  return { kind: refusal, ruleId: row.refused_by };
}

/**
 * Decides one authorization as the reservation would, on the same data, and writes nothing: no
 * reservation, no usage, no lock (the dry run, and the ERC-7677 stub). Idempotent replays are not
 * looked up.
 */
export async function dryRunReservation(db: Queryable, r: Reservation): Promise<ReserveOutcome> {
  return (await reserveMany(db, r.projectId, [{ ...r, clientNonce: null }], { dryRun: true }))[0]!;
}

/** Reserves maxGasCost for one authorization (a batch of one). */
export async function reserve(db: Queryable, r: Reservation): Promise<ReserveOutcome> {
  return (await reserveMany(db, r.projectId, [r]))[0]!;
}

export type Outcome = "success" | "reverted";

/** One operation our paymaster paid for, as the EntryPoint reported it, with the authorization it used. */
export interface PaidOperation {
  authId: string;
  chainId: number;
  paymaster: string;
  outcome: Outcome;
  actualGasUsed: bigint;
  actualGasCostWei: bigint;
  txHash: string;
  userOpHash: string;
}

/** What a gas tank was charged for a paid operation, and why not all of it when it was not. */
export type Billing =
  | {
      kind: "charged";
      projectId: string;
      billedWei: bigint;
      /** Charged after the reservation had been released (only after a deep reorganisation). */
      late: boolean;
      /** Why less than the actual cost was charged; null when all of it was. */
      shortfall: "cost_above_reservation" | "tank_short_after_release" | null;
    }
  | { kind: "unbilled"; projectId: string | null; reason: UnbilledReason };

export type UnbilledReason =
  | "no_authorization_log"
  | "unknown_authorization"
  | "authorization_of_another_paymaster"
  | "authorization_already_settled";

/**
 * The form of every authorization id the reservation writes (0x and 64 lower-case hexadecimal
 * digits); the column holds their 32 bytes (migration 046), so anything else names no sponsorship.
 */
const AUTH_ID = /^0x[0-9a-f]{64}$/;
/**
 * A sponsorship by its authorization id ($1), kept as its 32 bytes (migration 046), through the
 * index on its first 64 bits (migration 048), then the whole id.
 */
const BY_AUTH_ID = `${authIdKey("auth_id")} = ${authIdKey(bytes("$1"))} AND auth_id = ${bytes("$1")}`;

/**
 * Charges the gas tank of the authorization an on-chain operation used, inside the caller's
 * transaction (the caller records the operation in the same one, which makes this exactly once).
 *
 * - A pending reservation is settled: the tank gets back what it held beyond the actual cost.
 * - A released reservation (which can only happen after a reorganisation deeper than the
 *   confirmation depth, since release waits for chain time to pass validUntil) is charged late,
 *   as far as the tank holds; the rest is returned as a shortfall for the caller to report.
 * - Anything else cannot be charged to a tank and is returned as unbilled, with the reason.
 */
export async function billOperation(tx: Queryable, op: PaidOperation): Promise<Billing> {
  assert.ok(op.actualGasCostWei >= 0n && op.actualGasUsed >= 0n, "actual gas must not be negative");
  if (!AUTH_ID.test(op.authId)) return { kind: "unbilled", projectId: null, reason: "unknown_authorization" };
  const rows = await tx.query<{
    project_id: string;
    status: string;
    max_gas_cost: string;
    chain_id: number;
    paymaster: string | null;
    day: string;
  }>(
    `SELECT project_id, status, max_gas_cost::text, chain_id, paymaster,
       ((created_at AT TIME ZONE 'UTC')::date)::text AS day
     FROM sponsorships WHERE ${BY_AUTH_ID} FOR UPDATE`,
    [op.authId],
    "settlement-sponsorship",
  );
  const row = rows[0];
  if (!row) return { kind: "unbilled", projectId: null, reason: "unknown_authorization" };
  if (row.chain_id !== op.chainId || (row.paymaster !== null && row.paymaster !== op.paymaster)) {
    return { kind: "unbilled", projectId: row.project_id, reason: "authorization_of_another_paymaster" };
  }
  if (row.status === "pending") return settlePending(tx, op, row);
  if (row.status === "expired") return settleLate(tx, op, row);
  return { kind: "unbilled", projectId: row.project_id, reason: "authorization_already_settled" };
}

async function settlePending(
  tx: Queryable,
  op: PaidOperation,
  row: { project_id: string; chain_id: number; max_gas_cost: string; day: string },
): Promise<Billing> {
  // The contract makes the EntryPoint's prefund (the most it can charge) fit the reservation,
  // so the cost never exceeds it; were it ever to, the tank pays the reservation and the rest
  // is reported rather than taken from money the studio did not set aside.
  const maxWei = BigInt(row.max_gas_cost);
  const billedWei = op.actualGasCostWei <= maxWei ? op.actualGasCostWei : maxWei;
  const refund = maxWei - billedWei;
  await settleSponsorship(tx, op, billedWei, row, { kind: "settle", amountWei: refund, policyOps: 0 });
  const shortfall = billedWei < op.actualGasCostWei ? "cost_above_reservation" : null;
  return { kind: "charged", projectId: row.project_id, billedWei, late: false, shortfall };
}

async function settleLate(
  tx: Queryable,
  op: PaidOperation,
  row: { project_id: string; chain_id: number; max_gas_cost: string; day: string },
): Promise<Billing> {
  const balanceWei = await lockedTank(tx, row.project_id, row.chain_id);
  const maxWei = BigInt(row.max_gas_cost);
  const due = op.actualGasCostWei <= maxWei ? op.actualGasCostWei : maxWei;
  const billedWei = due <= balanceWei ? due : balanceWei;
  // Its release gave the whole reservation back to the policy windows: count what was charged again.
  await settleSponsorship(tx, op, billedWei, row, {
    kind: "late_settle",
    amountWei: -billedWei,
    policyOps: -1,
  });
  const shortfall = billedWei < op.actualGasCostWei ? "tank_short_after_release" : null;
  return { kind: "charged", projectId: row.project_id, billedWei, late: true, shortfall };
}

/**
 * The charge's writes in one statement (db/functions/settle_sponsorship.sql): the sponsorship
 * marked settled with what was billed, the tank's ledger entry of `amountWei` (what the tank gets
 * back; negative takes), and the day's cap count and the policy windows' spend moved the other way
 * by the same amount, the windows' operation counts by `policyOps`. Four statements before, each a
 * round trip of the watcher's transaction per operation.
 */
async function settleSponsorship(
  tx: Queryable,
  op: PaidOperation,
  billedWei: bigint,
  row: { project_id: string; chain_id: number; day: string },
  moves: { kind: "settle" | "late_settle"; amountWei: bigint; policyOps: number },
): Promise<void> {
  await tx.query(
    `SELECT settle_sponsorship($1, $2, $3::numeric, $4::numeric, $5, $6, $7, $8::integer, $9, $10::numeric,
       $11::date, $12::bigint)`,
    [
      op.authId,
      op.outcome,
      op.actualGasUsed.toString(),
      billedWei.toString(),
      op.txHash,
      op.userOpHash,
      row.project_id,
      row.chain_id,
      moves.kind,
      moves.amountWei.toString(),
      row.day,
      moves.policyOps,
    ],
    "settlement-charge",
  );
}

/**
 * Undoes what billOperation charged for an operation whose block a reorganisation removed: a
 * compensating `reversal` entry gives the charge back, and the authorization counts as released,
 * so that the same operation charged again if it lands in the new chain is a late charge.
 */
export async function reverseBilling(
  tx: Queryable,
  r: { authId: string; projectId: string; chainId: number; billedWei: bigint; reference: string },
): Promise<boolean> {
  const applied = await move(tx, r.projectId, r.chainId, "reversal", r.billedWei, r.reference);
  if (!applied) return false;
  const rows = await tx.query<{ day: string }>(
    `UPDATE sponsorships SET status = 'expired', actual_gas = 0, actual_gas_cost = 0, tx_hash = NULL,
       user_op_hash = NULL, settled_at = now()
     WHERE ${BY_AUTH_ID} RETURNING ((created_at AT TIME ZONE 'UTC')::date)::text AS day`,
    [r.authId],
  );
  if (rows[0]) await giveBackDailyUsage(tx, r.projectId, r.chainId, rows[0].day, r.billedWei);
  // Now as if released: the charge and the operation go back to its policy windows.
  await adjustPolicyUsage(tx, r.authId, r.billedWei, 1);
  return true;
}

/**
 * Releases a reservation whose window ended without the operation appearing. At most once. One
 * statement (db/functions/release_sponsorship.sql): the sponsorship marked expired, the
 * reservation back to the tank, the day's count and the policy windows given back.
 */
export async function release(db: Db, authId: string): Promise<boolean> {
  const [row] = await db.query<{ released: boolean }>(
    "SELECT release_sponsorship($1) AS released",
    [authId],
    "settlement-release",
  );
  return row!.released;
}

/**
 * Credits a deposit to the project's tank on the chain it arrived on (`chainId`; without it, the
 * project's home chain); a reference already credited is ignored (false).
 */
export async function creditDeposit(
  db: Db,
  d: { projectId: string; chainId?: number; reference: string; amountWei: bigint },
  tx?: Queryable,
): Promise<boolean> {
  assert.ok(d.amountWei > 0n, "a deposit must be positive");
  const apply = (q: Queryable) =>
    move(q, d.projectId, d.chainId ?? null, "deposit", d.amountWei, d.reference);
  return tx ? apply(tx) : db.transaction(apply);
}

/**
 * Appends one entry and moves the chain's cached tank by the same amount, unless the reference
 * exists: db/functions/ledger_move.sql, the one writer of both. A null chain is the project's home.
 */
async function move(
  tx: Queryable,
  projectId: string,
  chainId: number | null,
  kind: string,
  amountWei: bigint,
  reference: string,
) {
  const [row] = await tx.query<{ n: number }>(
    "SELECT ledger_move($1, $2::integer, $3, ARRAY[$4::numeric], ARRAY[$5::text]) AS n",
    [projectId, chainId, kind, amountWei.toString(), reference],
  );
  return row!.n === 1;
}

/**
 * The project's tank on a chain, with the project's row locked: what orders a move that takes
 * from a tank against the reservations of every chain (reserve_sponsorships.sql locks that row).
 */
async function lockedTank(tx: Queryable, projectId: string, chainId: number): Promise<bigint> {
  const [row] = await tx.query<{ balance: string }>(
    `SELECT ${tankBalanceSql("p", "$2")}::text AS balance FROM projects p WHERE p.id = $1 FOR UPDATE OF p`,
    [projectId, chainId],
  );
  assert.ok(row, `unknown project ${projectId}`);
  return BigInt(row.balance);
}

async function giveBackDailyUsage(
  tx: Queryable,
  projectId: string,
  chainId: number,
  day: string,
  amountWei: bigint,
) {
  await adjustDailyUsage(tx, projectId, chainId, day, -amountWei);
}

/** Counts (positive) or gives back (negative) against a chain's day's cap: db/functions/daily_usage_adjust.sql. */
async function adjustDailyUsage(
  tx: Queryable,
  projectId: string,
  chainId: number,
  day: string,
  deltaWei: bigint,
) {
  if (deltaWei === 0n) return;
  await tx.query("SELECT daily_usage_adjust($1, $2::integer, $3::date, $4::numeric)", [
    projectId,
    chainId,
    day,
    deltaWei.toString(),
  ]);
}

/**
 * Gives back to the policy windows an authorization was counted in (db/functions/policy_usage_adjust.sql): settlement
 * gives back the unspent part of the reservation, a release the reservation and its operation.
 * Negative amounts count again. Nothing to do for projects without caps.
 */
async function adjustPolicyUsage(tx: Queryable, authId: string, spentWei: bigint, ops: number) {
  if (spentWei === 0n && ops === 0) return;
  await tx.query("SELECT policy_usage_adjust($1, $2::numeric, $3::bigint)", [
    authId,
    spentWei.toString(),
    ops,
  ]);
}

export interface ChainParity {
  chainId: number;
  ledgerBalance: string;
  cachedBalance: string;
  delta: string;
  inSync: boolean;
}

/** A project's parity: the top-level fields are its home chain's; `chains` has every tank's. */
export interface ParityReport extends Omit<ChainParity, "chainId"> {
  projectId: string;
  chains: ChainParity[];
}

/**
 * Cached balance against the ledger, for the given projects (all when null), per tank: the home
 * chain's and every other chain's the project has a tank on (migration 035). The ledger's side is
 * the tank's latest checkpoint (ledger/checkpoints.ts: verified against the ledger when it was
 * written) plus the chain's entries after it, an index-only range of what happened since; with
 * `fromScratch` it is the sum of every entry, which proves the checkpoints themselves.
 */
export async function parity(
  db: Queryable,
  projectIds: string[] | null,
  { fromScratch = false }: { fromScratch?: boolean } = {},
): Promise<ParityReport[]> {
  const tanks = await db.query<{
    id: string;
    chain_id: number;
    home: boolean;
    cached: string;
    after_id: string;
    balance: string;
  }>(
    `SELECT t.project_id AS id, t.chain_id, t.home, t.balance::text AS cached,
       COALESCE(c.last_entry_id, 0)::text AS after_id, COALESCE(c.balance, 0)::text AS balance
     FROM project_tanks t
     LEFT JOIN LATERAL (SELECT last_entry_id, balance FROM ledger_checkpoints k
       WHERE k.project_id = t.project_id AND k.chain_id = t.chain_id AND NOT $2
       ORDER BY last_entry_id DESC LIMIT 1) c ON true
     ${projectIds ? "WHERE t.project_id = ANY($1::text[])" : "WHERE $1::text[] IS NULL"}
     ORDER BY t.project_id, t.home DESC, t.chain_id`,
    [projectIds, fromScratch],
  );
  const tails = await ledgerTails(db, tanks);
  const reports: ParityReport[] = [];
  for (const r of tanks) {
    const ledger = BigInt(r.balance) + tails.get(`${r.chain_id}:${r.id}`)!;
    const delta = BigInt(r.cached) - ledger;
    const chain: ChainParity = {
      chainId: r.chain_id,
      ledgerBalance: ledger.toString(),
      cachedBalance: r.cached,
      delta: delta.toString(),
      inSync: delta === 0n,
    };
    if (r.home) {
      const { chainId: _home, ...top } = chain;
      reports.push({ projectId: r.id, ...top, chains: [chain] });
    } else {
      reports[reports.length - 1]!.chains.push(chain);
    }
  }
  return reports;
}

/**
 * The sum of each tank's entries after an id. One branch per tank, each with its own values, so
 * that each is planned for them: a generic plan of one correlated query had to guess, and with
 * one project holding nearly all the entries it could walk the whole ledger by id.
 */
async function ledgerTails(db: Queryable, tanks: { id: string; chain_id: number; after_id: string }[]) {
  const sums = new Map<string, bigint>();
  for (let i = 0; i < tanks.length; i += 100) {
    const part = tanks.slice(i, i + 100);
    const rows = await db.query<{ id: string; chain_id: number; amount: string }>(
      part
        .map(
          (_, j) => `(SELECT $${3 * j + 1}::text AS id, $${3 * j + 2}::integer AS chain_id,
             COALESCE(sum(amount), 0)::text AS amount FROM ledger_entries
             WHERE ${projectIdsAbove(`$${3 * j + 1}::text`, `$${3 * j + 3}::bigint`)}
               AND project_id = $${3 * j + 1} AND chain_id = $${3 * j + 2})`,
        )
        .join(" UNION ALL "),
      part.flatMap((t) => [t.id, t.chain_id, t.after_id]),
    );
    for (const r of rows) sums.set(`${r.chain_id}:${r.id}`, BigInt(r.amount));
  }
  return sums;
}

/**
 * Takes back a credit that a reorganisation removed from the chain, with a `reversal` entry under
 * `reference`, inside the caller's transaction. The tank never goes below zero: when the project
 * has already spent part of the credit, only what the balance holds is taken, and the rest comes
 * back as `shortfallWei` for the caller to record as a debt. At most once per reference: a repeat
 * changes nothing and reports what the first took.
 */
export async function reverseCredit(
  tx: Queryable,
  r: { projectId: string; chainId: number; reference: string; amountWei: bigint },
): Promise<{ reversedWei: bigint; shortfallWei: bigint; applied: boolean }> {
  assert.ok(r.amountWei > 0n, "a reversed credit is positive");
  // The row lock orders this against reservations, which take from the same balance.
  const balanceWei = await lockedTank(tx, r.projectId, r.chainId);
  const [earlier] = await tx.query<{ amount: string }>(
    `SELECT amount::text FROM ledger_entries
     WHERE md5(kind || E'\\n' || reference)::uuid = md5('reversal' || E'\\n' || $1)::uuid
       AND kind = 'reversal' AND reference = $1`,
    [r.reference],
  );
  if (earlier) {
    const reversedWei = -BigInt(earlier.amount);
    return { reversedWei, shortfallWei: r.amountWei - reversedWei, applied: false };
  }
  const reversedWei = balanceWei < r.amountWei ? balanceWei : r.amountWei;
  await move(tx, r.projectId, r.chainId, "reversal", -reversedWei, r.reference);
  return { reversedWei, shortfallWei: r.amountWei - reversedWei, applied: true };
}
