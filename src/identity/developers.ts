import type { Queryable } from "../db/db.ts";
import type { VerifiedIdentity } from "./tokens.ts";

/**
 * Finds the developer behind a verified token, creating the record on first sign-in. A member
 * invited by email before ever signing in already has a record without a subject; the first
 * token carrying that email claims it. Null when the email already belongs to another subject.
 */
export async function resolveDeveloper(db: Queryable, id: VerifiedIdentity): Promise<number | null> {
  const known = await db.query<{ id: number; email: string }>(
    "SELECT id, email FROM developers WHERE subject = $1",
    [id.subject],
  );
  if (known[0]) return known[0].id;
  const claimed = await db.query<{ id: number }>(
    `INSERT INTO developers (email, subject) VALUES ($1, $2)
     ON CONFLICT (email) DO UPDATE SET subject = EXCLUDED.subject
       WHERE developers.subject IS NULL
     RETURNING id`,
    [id.email, id.subject],
  );
  if (claimed[0]) return claimed[0].id;
  // The email belongs to another subject (another account at the provider): never merge them.
  return null;
}

/** Finds or creates the record of a developer known only by email (an invitation). */
export async function developerByEmail(db: Queryable, email: string): Promise<number> {
  const rows = await db.query<{ id: number }>(
    `INSERT INTO developers (email) VALUES ($1)
     ON CONFLICT (email) DO UPDATE SET email = EXCLUDED.email
     RETURNING id`,
    [email.toLowerCase()],
  );
  return rows[0]!.id;
}
