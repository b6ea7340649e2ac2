import type { Scope } from "../api-keys/format.ts";

/**
 * Who may do what, as data (DESIGN.md §3). Deny by default: an action missing from a table is
 * refused to everyone.
 */
export type Role = "owner" | "admin" | "developer" | "viewer";
export const ROLES: readonly Role[] = ["owner", "admin", "developer", "viewer"];
const RANK: Record<Role, number> = { viewer: 1, developer: 2, admin: 3, owner: 4 };

export type ProjectAction =
  | "project:read"
  | "project:update"
  | "allowlist:write"
  | "apikeys:read"
  | "apikeys:write"
  | "sponsor:authorize";

export type OrgAction = "org:read" | "members:write" | "members:role" | "projects:create";

/** The least role a developer needs, per action; `null` means developers never may. */
const PROJECT_MIN_ROLE: Record<ProjectAction, Role | null> = {
  "project:read": "viewer",
  "apikeys:read": "viewer",
  "allowlist:write": "developer",
  "apikeys:write": "developer",
  "project:update": "admin",
  // Authorization is a machine-to-machine call made with an API key.
  "sponsor:authorize": null,
};

/** The scope an API key needs, per action; `null` means keys never may. */
const PROJECT_KEY_SCOPE: Record<ProjectAction, Scope | null> = {
  "project:read": "read",
  "apikeys:read": "manage",
  "allowlist:write": "manage",
  "apikeys:write": "manage",
  "project:update": null,
  "sponsor:authorize": "sponsor",
};

const ORG_MIN_ROLE: Record<OrgAction, Role> = {
  "org:read": "viewer",
  "projects:create": "admin",
  "members:write": "admin",
  "members:role": "owner",
};

export function roleAllows(role: Role | null, action: ProjectAction): boolean {
  const min = PROJECT_MIN_ROLE[action];
  return role !== null && min !== null && RANK[role] >= RANK[min];
}

export function orgRoleAllows(role: Role | null, action: OrgAction): boolean {
  return role !== null && RANK[role] >= RANK[ORG_MIN_ROLE[action]];
}

export function scopeAllows(scopes: readonly Scope[], action: ProjectAction): boolean {
  const needed = PROJECT_KEY_SCOPE[action];
  if (needed === null) return false;
  // A key that may manage the project may also read it.
  return scopes.includes(needed) || (needed === "read" && scopes.includes("manage"));
}

export function outranks(a: Role, b: Role): boolean {
  return RANK[a] >= RANK[b];
}
