import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ROLES, type Role } from "../access/roles.ts";
import { decideMemberUpsert } from "./policy.ts";

describe("decideMemberUpsert", () => {
  it("only an owner changes an existing member's role; an admin may re-post a member with its own role", () => {
    for (const current of ["admin", "developer", "viewer"] as const) {
      for (const next of ["admin", "developer", "viewer"] as const) {
        const byAdmin = decideMemberUpsert({
          actorRole: "admin",
          currentRole: current,
          newRole: next,
          ownerCount: 1,
        });
        const byOwner = decideMemberUpsert({
          actorRole: "owner",
          currentRole: current,
          newRole: next,
          ownerCount: 1,
        });
        assert.equal(byOwner.kind, "allow", `owner: ${current} → ${next}`);
        assert.equal(byAdmin.kind, current === next ? "allow" : "deny", `admin: ${current} → ${next}`);
      }
    }
  });

  it("admins add new members up to admin, never owner", () => {
    for (const next of ROLES) {
      const d = decideMemberUpsert({ actorRole: "admin", currentRole: null, newRole: next, ownerCount: 1 });
      assert.equal(d.kind, next === "owner" ? "deny" : "allow", next);
    }
  });

  it("holds its laws over every combination: a change of role needs an owner, a grant needs rank, one owner stays", () => {
    const rank: Record<Role, number> = { viewer: 1, developer: 2, admin: 3, owner: 4 };
    for (const actorRole of ROLES) {
      for (const currentRole of [null, ...ROLES]) {
        for (const newRole of ROLES) {
          for (const ownerCount of [1, 2]) {
            const d = decideMemberUpsert({ actorRole, currentRole, newRole, ownerCount });
            if (d.kind === "deny") continue;
            const label = JSON.stringify({ actorRole, currentRole, newRole, ownerCount });
            assert.ok(rank[actorRole] >= rank[newRole], label);
            if (currentRole !== null && currentRole !== newRole) assert.equal(actorRole, "owner", label);
            if (currentRole === "owner" && newRole !== "owner") assert.ok(ownerCount > 1, label);
          }
        }
      }
    }
  });
});
