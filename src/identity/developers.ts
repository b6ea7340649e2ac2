import assert from "node:assert/strict";
import type { Queryable } from "../db/db.ts";
import { isUnverifiedEmail, normalizeEmail, unverifiedEmailOf } from "./email.ts";
import type { VerifiedIdentity } from "./tokens.ts";

/** A developer's record: its id and the address on record (verified, or a placeholder). */
export interface DeveloperRecord {
  id: number;
  email: string;
}

/**
 * Finds the developer behind a verified token, creating the record on first sign-in. A member
 * invited by email before ever signing in already has a record without a subject; the first
 * token whose provider vouches for that email (`email_verified: true`) claims it. Null when the
 * email already belongs to another subject.
 *
 * A token without a verified, comparable email (see tokens.ts) still signs in, as an identity of
 * its own: a record under a placeholder address unique to its subject (`unverifiedEmailOf`).
 * It must never claim an invitation, and it must not take the address either: a record under
 * an unverified address would receive every later invitation to it, and would pass for that
 * address in operator checks. Once the provider vouches for the address, the record takes it
 * (when no other record holds it).
 */
export async function resolveDeveloper(db: Queryable, id: VerifiedIdentity): Promise<DeveloperRecord | null> {
  const known = await bySubject(db, id.subject);
  if (known) {
    if (id.email !== null && isUnverifiedEmail(known.email)) return takeAddress(db, known, id.email);
    return known;
  }
  if (id.email === null) {
    await db.query("INSERT INTO developers (email, subject) VALUES ($1, $2) ON CONFLICT DO NOTHING", [
      unverifiedEmailOf(id.subject),
      id.subject,
    ]);
    return bySubject(db, id.subject);
  }
  let claimed: DeveloperRecord[];
  try {
    claimed = await db.query<DeveloperRecord>(
      `INSERT INTO developers (email, subject) VALUES ($1, $2)
       ON CONFLICT (email) DO UPDATE SET subject = EXCLUDED.subject
         WHERE developers.subject IS NULL
       RETURNING id, email`,
      [id.email, id.subject],
    );
  } catch (err) {
    // The same subject's first requests race: the arbiter (email) saw no row yet, and the other
    // unique index (subject) then waits for the first insert and fails once it commits. The
    // record exists now; read it (measured: 1 in ~5 runs of 36 concurrent first requests on
    // PostgreSQL answered 500 before this).
    if (!isUniqueViolation(err)) throw err;
    claimed = [];
  }
  if (claimed[0]) return claimed[0];
  // The same subject's first two requests may race; otherwise the email belongs to another
  // subject (another account at the provider): never merge them.
  return bySubject(db, id.subject);
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "23505";
}

async function bySubject(db: Queryable, subject: string): Promise<DeveloperRecord | null> {
  const rows = await db.query<DeveloperRecord>("SELECT id, email FROM developers WHERE subject = $1", [
    subject,
  ]);
  return rows[0] ?? null;
}

/** Gives a placeholder record its now-verified address, unless another record holds it. */
async function takeAddress(db: Queryable, known: DeveloperRecord, email: string): Promise<DeveloperRecord> {
  const rows = await db.query<DeveloperRecord>(
    `UPDATE developers SET email = $2
     WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM developers WHERE email = $2)
     RETURNING id, email`,
    [known.id, email],
  );
  return rows[0] ?? known;
}

/**
 * Finds or creates the record of a developer known only by email (an invitation). The address
 * must already be in normalised form (`normalizeEmail`), as the HTTP edge refuses the others.
 */
export async function developerByEmail(db: Queryable, email: string): Promise<number> {
  assert.equal(normalizeEmail(email), email, "developerByEmail takes a normalised address");
  const rows = await db.query<{ id: number }>(
    `INSERT INTO developers (email) VALUES ($1)
     ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email
     RETURNING id`,
    [email],
  );
  return rows[0]!.id;
}

/**
 * Locks the developer's record for the rest of the transaction, so that two concurrent
 * creations counted against the developer's quota are counted one after the other.
 */
export async function lockDeveloper(tx: Queryable, developerId: number): Promise<void> {
  await tx.query("SELECT id FROM developers WHERE id = $1 FOR NO KEY UPDATE", [developerId]);
}
