import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decideMemberUpsert } from "../orgs/policy.ts";
import { roleAllows, scopeAllows } from "./roles.ts";

describe("roles and scopes", () => {
  it("ranks owner > admin > developer > viewer", () => {
    assert.equal(roleAllows("viewer", "project:read"), true);
    assert.equal(roleAllows("viewer", "allowlist:write"), false);
    assert.equal(roleAllows("developer", "apikeys:write"), true);
    assert.equal(roleAllows("developer", "project:update"), false);
    assert.equal(roleAllows("admin", "project:update"), true);
    assert.equal(roleAllows("owner", "sponsor:authorize"), false, "authorize is for API keys only");
  });

  it("keys reach only what their scopes name; manage implies read", () => {
    assert.equal(scopeAllows(["sponsor"], "sponsor:authorize"), true);
    assert.equal(scopeAllows(["sponsor"], "project:read"), false);
    assert.equal(scopeAllows(["manage"], "project:read"), true);
    assert.equal(scopeAllows(["read"], "allowlist:write"), false);
    assert.equal(scopeAllows(["manage", "read", "sponsor"], "project:update"), false);
  });

  it("an organization always keeps an owner", () => {
    assert.deepEqual(
      decideMemberUpsert({ actorRole: "owner", currentRole: "owner", newRole: "admin", ownerCount: 1 }).kind,
      "deny",
    );
    assert.deepEqual(
      decideMemberUpsert({ actorRole: "owner", currentRole: "owner", newRole: "admin", ownerCount: 2 }).kind,
      "allow",
    );
    assert.equal(
      decideMemberUpsert({ actorRole: "admin", currentRole: null, newRole: "owner", ownerCount: 1 }).kind,
      "deny",
    );
  });
});
