import type { Role } from "../access/roles.ts";
import type { Queryable } from "../db/db.ts";

export interface OrgRecord {
  id: number;
  name: string;
  slug: string;
  role: Role;
  created_at: string;
}

export interface MemberRecord {
  developer_id: number;
  email: string;
  role: Role;
  created_at: string;
}

/** Creates the organization with its creator as owner; null when the slug is taken. */
export async function insertOrg(
  tx: Queryable,
  o: { name: string; slug: string; ownerId: number },
): Promise<OrgRecord | null> {
  const rows = await tx.query<{ id: number; name: string; slug: string; created_at: Date }>(
    `INSERT INTO organizations (name, slug) VALUES ($1, $2)
     ON CONFLICT (slug) DO NOTHING RETURNING id, name, slug, created_at`,
    [o.name, o.slug],
  );
  const org = rows[0];
  if (!org) return null;
  await tx.query("INSERT INTO org_members (org_id, developer_id, role) VALUES ($1, $2, 'owner')", [
    org.id,
    o.ownerId,
  ]);
  return {
    id: org.id,
    name: org.name,
    slug: org.slug,
    role: "owner",
    created_at: org.created_at.toISOString(),
  };
}

/**
 * Organizations the developer created. An organization's creator is the member inserted in the
 * same transaction as the organization (insertOrg), so its membership carries the very same
 * `created_at` (`now()` is the transaction's start); anyone added later joins in a later
 * transaction. Handing ownership on or stepping down does not change this count: the quota
 * bounds what a developer makes, not what it holds today.
 */
export async function countOrgsCreatedBy(tx: Queryable, developerId: number): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM org_members m JOIN organizations o ON o.id = m.org_id
     WHERE m.developer_id = $1 AND m.created_at = o.created_at`,
    [developerId],
  );
  return rows[0]!.n;
}

export async function listOrgsOf(db: Queryable, developerId: number): Promise<OrgRecord[]> {
  const rows = await db.query<{ id: number; name: string; slug: string; role: Role; created_at: Date }>(
    `SELECT o.id, o.name, o.slug, m.role, o.created_at FROM organizations o
     JOIN org_members m ON m.org_id = o.id WHERE m.developer_id = $1 ORDER BY o.id`,
    [developerId],
  );
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
}

export async function listMembers(db: Queryable, orgId: number): Promise<MemberRecord[]> {
  const rows = await db.query<{ developer_id: number; email: string; role: Role; created_at: Date }>(
    `SELECT m.developer_id, d.email, m.role, m.created_at FROM org_members m
     JOIN developers d ON d.id = m.developer_id WHERE m.org_id = $1 ORDER BY m.created_at, m.developer_id`,
    [orgId],
  );
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
}

export async function getMember(
  db: Queryable,
  orgId: number,
  developerId: number,
): Promise<MemberRecord | null> {
  const rows = await db.query<{ developer_id: number; email: string; role: Role; created_at: Date }>(
    `SELECT m.developer_id, d.email, m.role, m.created_at FROM org_members m
     JOIN developers d ON d.id = m.developer_id WHERE m.org_id = $1 AND m.developer_id = $2`,
    [orgId, developerId],
  );
  return rows[0] ? { ...rows[0], created_at: rows[0].created_at.toISOString() } : null;
}

/** Locks the organization's membership for the rest of the transaction (role changes serialise). */
export async function lockOrg(tx: Queryable, orgId: number): Promise<void> {
  await tx.query("SELECT id FROM organizations WHERE id = $1 FOR UPDATE", [orgId]);
}

export async function countOwners(tx: Queryable, orgId: number): Promise<number> {
  const rows = await tx.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM org_members WHERE org_id = $1 AND role = 'owner'",
    [orgId],
  );
  return rows[0]!.n;
}

export async function upsertMember(
  tx: Queryable,
  orgId: number,
  developerId: number,
  role: Role,
): Promise<void> {
  await tx.query(
    `INSERT INTO org_members (org_id, developer_id, role) VALUES ($1, $2, $3)
     ON CONFLICT (org_id, developer_id) DO UPDATE SET role = EXCLUDED.role`,
    [orgId, developerId, role],
  );
}
