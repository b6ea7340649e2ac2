import type { FastifyRequest } from "fastify";
import type { Queryable } from "../db/db.ts";
import { ApiError, forbidden, notFound } from "../http/problem.ts";
import { requireDeveloper, requirePrincipal } from "../identity/authenticate.ts";
import {
  type OrgAction,
  orgRoleAllows,
  type ProjectAction,
  type Role,
  roleAllows,
  scopeAllows,
} from "./roles.ts";

/**
 * The doors of every project and organization route. A project the caller cannot see answers
 * 404 exactly like one that does not exist, so tenants learn nothing about each other; a
 * project the caller can see but not change answers 403.
 */
export async function authorizeProject(
  db: Queryable,
  request: FastifyRequest,
  projectId: string,
  action: ProjectAction,
): Promise<{ role: Role | null }> {
  const principal = requirePrincipal(request);
  if (principal.kind === "apiKey") {
    if (principal.projectId !== projectId) throw notFound("project");
    if (!scopeAllows(principal.scopes, action)) {
      throw forbidden(`this API key's scopes (${principal.scopes.join(", ")}) do not allow this`);
    }
    return { role: null };
  }
  const rows = await db.query<{ role: Role }>(
    `SELECT m.role FROM projects p
     JOIN org_members m ON m.org_id = p.org_id AND m.developer_id = $2
     WHERE p.id = $1`,
    [projectId, principal.developerId],
  );
  const role = rows[0]?.role;
  if (!role) throw notFound("project");
  if (!roleAllows(role, action)) throw forbidden(`the ${role} role does not allow this`);
  return { role };
}

export interface OrgAccess {
  orgId: number;
  role: Role;
  developerId: number;
}

/** Resolves an organization by id or slug for the calling developer and checks the action. */
export async function authorizeOrg(
  db: Queryable,
  request: FastifyRequest,
  orgRef: string,
  action: OrgAction,
): Promise<OrgAccess> {
  const developer = requireDeveloper(request);
  const byId = /^[1-9][0-9]{0,15}$/.test(orgRef);
  const rows = await db.query<{ org_id: number; role: Role }>(
    `SELECT o.id AS org_id, m.role FROM organizations o
     JOIN org_members m ON m.org_id = o.id AND m.developer_id = $2
     WHERE ${byId ? "o.id = $1::bigint" : "o.slug = $1"}`,
    [orgRef, developer.developerId],
  );
  const row = rows[0];
  if (!row) throw notFound("organization");
  if (!orgRoleAllows(row.role, action)) {
    throw new ApiError("forbidden", `the ${row.role} role does not allow this in the organization`);
  }
  return { orgId: row.org_id, role: row.role, developerId: developer.developerId };
}
