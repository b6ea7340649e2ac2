import assert from "node:assert/strict";
import type { Db, Queryable } from "../db/db.ts";

/**
 * The gas tank ledger (DESIGN.md §2). Every movement is an append-only entry with a unique
 * reference, and the cached `projects.gas_tank_balance` moves in the same transaction, so the
 * two always agree and nothing is applied twice. Amounts are wei as bigint.
 */

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
  validAfterSec: number;
  validUntilSec: number;
  /** The exact response body, kept for idempotent replays when a nonce is given. */
  response: string | null;
}

export type ReserveOutcome =
  | { kind: "reserved" }
  | { kind: "replay"; requestDigest: string | null; response: string | null }
  | { kind: "not_allowlisted" }
  | { kind: "insufficient_balance" }
  | { kind: "daily_cap_exceeded" };

/**
 * Reserves for several authorizations of one project in a single statement, each decided on its
 * own (see migrations/002_reserve.sql). Outcomes come back in the order of `items`.
 */
export async function reserveMany(
  db: Queryable,
  projectId: string,
  items: Reservation[],
): Promise<ReserveOutcome[]> {
  for (const r of items) {
    assert.equal(r.projectId, projectId, "a batch holds one project");
    assert.ok(r.maxGasCostWei >= 0n, "maxGasCost must not be negative");
    assert.ok(r.validUntilSec > r.validAfterSec, "validUntil must be after validAfter");
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
    valid_after: r.validAfterSec,
    valid_until: r.validUntilSec,
    response: r.response,
  }));
  const rows = await db.query<{
    idx: number;
    outcome: string;
    stored_digest: string | null;
    stored_response: string | null;
  }>("SELECT idx, outcome, stored_digest, stored_response FROM reserve_sponsorships($1, $2::jsonb)", [
    projectId,
    JSON.stringify(payload),
  ]);
  const outcomes: ReserveOutcome[] = new Array(items.length);
  for (const row of rows) {
    outcomes[row.idx] =
      row.outcome === "replay"
        ? { kind: "replay", requestDigest: row.stored_digest, response: row.stored_response }
        : { kind: row.outcome as Exclude<ReserveOutcome["kind"], "replay"> };
  }
  assert.ok(outcomes.every(Boolean), "every reservation gets an outcome");
  return outcomes;
}

/** Reserves maxGasCost for one authorization (a batch of one). */
export async function reserve(db: Queryable, r: Reservation): Promise<ReserveOutcome> {
  return (await reserveMany(db, r.projectId, [r]))[0]!;
}

export type Outcome = "success" | "reverted";

export interface Settlement {
  authId: string;
  outcome: Outcome;
  actualGasUsed: bigint;
  actualGasCostWei: bigint;
  txHash?: string;
  userOpHash?: string;
}

/**
 * Settles a reservation once the operation is final on chain: gives back what the reservation
 * held beyond the actual cost. Applied at most once; returns false when already settled or
 * released, or unknown.
 */
export async function settle(db: Db, s: Settlement): Promise<boolean> {
  assert.ok(s.actualGasCostWei >= 0n && s.actualGasUsed >= 0n, "actual gas must not be negative");
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ project_id: string; max_gas_cost: string; day: string }>(
      `UPDATE sponsorships SET status = $2, actual_gas = $3, actual_gas_cost = $4, tx_hash = $5,
         user_op_hash = $6, settled_at = now()
       WHERE auth_id = $1 AND status = 'pending' AND $4::numeric <= max_gas_cost
       RETURNING project_id, max_gas_cost::text, ((created_at AT TIME ZONE 'UTC')::date)::text AS day`,
      [
        s.authId,
        s.outcome,
        s.actualGasUsed.toString(),
        s.actualGasCostWei.toString(),
        s.txHash ?? null,
        s.userOpHash ?? null,
      ],
    );
    const row = rows[0];
    if (!row) return false;
    const refund = BigInt(row.max_gas_cost) - s.actualGasCostWei;
    await move(tx, row.project_id, "settle", refund, s.authId);
    await giveBackDailyUsage(tx, row.project_id, row.day, refund);
    return true;
  });
}

/** Releases a reservation whose window ended without the operation appearing. At most once. */
export async function release(db: Db, authId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ project_id: string; max_gas_cost: string; day: string }>(
      `UPDATE sponsorships SET status = 'expired', settled_at = now()
       WHERE auth_id = $1 AND status = 'pending'
       RETURNING project_id, max_gas_cost::text, ((created_at AT TIME ZONE 'UTC')::date)::text AS day`,
      [authId],
    );
    const row = rows[0];
    if (!row) return false;
    await move(tx, row.project_id, "release", BigInt(row.max_gas_cost), authId);
    await giveBackDailyUsage(tx, row.project_id, row.day, BigInt(row.max_gas_cost));
    return true;
  });
}

/** Credits a deposit to the project's tank; a reference already credited is ignored (false). */
export async function creditDeposit(
  db: Db,
  d: { projectId: string; reference: string; amountWei: bigint },
  tx?: Queryable,
): Promise<boolean> {
  assert.ok(d.amountWei > 0n, "a deposit must be positive");
  const apply = (q: Queryable) => move(q, d.projectId, "deposit", d.amountWei, d.reference);
  return tx ? apply(tx) : db.transaction(apply);
}

/** Appends one entry and moves the cached balance by the same amount, unless the reference exists. */
async function move(tx: Queryable, projectId: string, kind: string, amountWei: bigint, reference: string) {
  const inserted = await tx.query(
    `INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES ($1, $2, $3, $4)
     ON CONFLICT (kind, reference) DO NOTHING RETURNING id`,
    [projectId, kind, amountWei.toString(), reference],
  );
  if (inserted.length === 0) return false;
  await tx.query("UPDATE projects SET gas_tank_balance = gas_tank_balance + $2::numeric WHERE id = $1", [
    projectId,
    amountWei.toString(),
  ]);
  return true;
}

async function giveBackDailyUsage(tx: Queryable, projectId: string, day: string, amountWei: bigint) {
  await tx.query(
    "UPDATE daily_usage SET spent = GREATEST(spent - $3::numeric, 0) WHERE project_id = $1 AND day = $2::date",
    [projectId, day, amountWei.toString()],
  );
}

export interface ParityReport {
  projectId: string;
  ledgerBalance: string;
  cachedBalance: string;
  delta: string;
  inSync: boolean;
}

/** Cached balance against the sum of the ledger, for the given projects (all when null). */
export async function parity(db: Queryable, projectIds: string[] | null): Promise<ParityReport[]> {
  const rows = await db.query<{ id: string; cached: string; ledger: string }>(
    `SELECT p.id, p.gas_tank_balance::text AS cached,
       COALESCE((SELECT sum(amount) FROM ledger_entries l WHERE l.project_id = p.id), 0)::text AS ledger
     FROM projects p ${projectIds ? "WHERE p.id = ANY($1::text[])" : ""} ORDER BY p.id`,
    projectIds ? [projectIds] : [],
  );
  return rows.map((r) => {
    const delta = BigInt(r.cached) - BigInt(r.ledger);
    return {
      projectId: r.id,
      ledgerBalance: r.ledger,
      cachedBalance: r.cached,
      delta: delta.toString(),
      inSync: delta === 0n,
    };
  });
}
