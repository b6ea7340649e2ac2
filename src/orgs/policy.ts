import { outranks, type Role } from "../access/roles.ts";

/**
 * Pure rules for membership changes. Admins may add members and change non-owners up to admin;
 * only owners grant or take away ownership; an organization always keeps one owner.
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
  if (currentRole === "owner" && newRole !== "owner" && ownerCount <= 1) {
    return { kind: "deny", code: "last_owner", detail: "an organization must keep at least one owner" };
  }
  return { kind: "allow" };
}
