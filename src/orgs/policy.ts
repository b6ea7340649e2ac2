import { outranks, type Role } from "../access/roles.ts";

/**
 * Pure rules for membership changes (INTERFACE.md: "admin role or higher to add or update, and
 * owner role to change a role"). Admins may add members with a role up to admin, and re-post an
 * existing member with the role it already has; only owners change an existing member's role,
 * whichever route asks (`POST /orgs/:orgId/members` or the PATCH); an organization always keeps
 * one owner.
 */
export type MembershipDecision =
  | { kind: "allow" }
  | { kind: "deny"; code: "forbidden" | "last_owner"; detail: string };

export function decideMemberUpsert(input: {
  actorRole: Role;
  currentRole: Role | null;
  newRole: Role;
  ownerCount: number;
}): MembershipDecision {
  const { actorRole, currentRole, newRole, ownerCount } = input;
  if (!outranks(actorRole, newRole)) {
    return { kind: "deny", code: "forbidden", detail: `a ${actorRole} cannot grant the ${newRole} role` };
  }
  if (currentRole !== null && !outranks(actorRole, currentRole)) {
    return { kind: "deny", code: "forbidden", detail: `a ${actorRole} cannot change a ${currentRole}` };
  }
  if (currentRole !== null && currentRole !== newRole && actorRole !== "owner") {
    return {
      kind: "deny",
      code: "forbidden",
      detail: `only an owner can change a member's role (this member is a ${currentRole})`,
    };
  }
  if (currentRole === "owner" && newRole !== "owner" && ownerCount <= 1) {
    return { kind: "deny", code: "last_owner", detail: "an organization must keep at least one owner" };
  }
  return { kind: "allow" };
}
