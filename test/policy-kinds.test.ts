/**
 * The registry of policy rule kinds (src/policies/kinds.ts) against everything that repeats it:
 * the store's CHECK constraint, the reservation function that enforces the rules, the error
 * catalogue, the README's table, and the route the dashboard reads.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { ERRORS } from "../src/http/catalogue.ts";
import { POLICY_KINDS, RULE_KINDS, type RuleKind } from "../src/policies/kinds.ts";
import { startTestApp, type TestApp } from "./support/app.ts";

const reservation = readFileSync(
  new URL("../src/db/functions/reserve_sponsorships.sql", import.meta.url),
  "utf8",
);
const literals = (text: string) => new Set([...text.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]!));

describe("the policy kinds registry", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t.close();
  });

  it("the store admits exactly the registered kinds", async () => {
    const rows = await t.db.query<{ def: string }>(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
       WHERE conrelid = 'policy_rules'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE 'CHECK ((kind = ANY%'`,
    );
    assert.equal(rows.length, 1, "one CHECK constraint lists the kinds");
    const admitted = [...literals(rows[0]!.def)].sort();
    assert.deepEqual(admitted, [...RULE_KINDS].sort());
  });

  it("the reservation enforces every kind and refuses with each kind's code", () => {
    const named = literals(reservation);
    for (const kind of RULE_KINDS) {
      const { counts, refusal } = POLICY_KINDS[kind];
      assert.ok(named.has(refusal.code), `reserve_sponsorships.sql answers ${refusal.code} (${kind})`);
      if (counts === null) {
        assert.ok(named.has(kind), `reserve_sponsorships.sql checks ${kind}`);
      } else {
        // Caps are counted per sender or for the whole project by the kind's prefix (the
        // function's `r.kind LIKE 'sender_%'`), and refuse with that scope's code.
        const scope = kind.startsWith("sender_") ? "sender" : kind.startsWith("project_") ? "project" : null;
        assert.ok(scope, `${kind}: a cap is a sender_ or a project_ kind`);
        assert.equal(refusal.code, `${scope}_cap_exceeded`, kind);
        const fields: readonly string[] = POLICY_KINDS[kind].fields;
        assert.ok(fields.includes(counts === "wei" ? "maxWei" : "maxOperations"), kind);
      }
    }
  });

  it("every refusal is in the error catalogue, and the README's table says the same", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const rows = [...readme.matchAll(/^\| (`[a-z_]+`(?:, `[a-z_]+`)*) \| .+? \| (\d{3}) `([a-z_]+)` \|$/gm)];
    const documented = new Map<string, { status: number; code: string }>();
    for (const [, kinds, status, code] of rows) {
      for (const k of kinds!.matchAll(/`([a-z_]+)`/g))
        documented.set(k[1]!, { status: Number(status), code: code! });
    }
    assert.deepEqual([...documented.keys()].sort(), [...RULE_KINDS].sort(), "the README lists every kind");
    for (const kind of RULE_KINDS) {
      const { code } = POLICY_KINDS[kind].refusal;
      const entry = ERRORS[code];
      assert.ok(entry, `${code} is in the catalogue`);
      assert.deepEqual(documented.get(kind), { status: entry.status, code }, kind);
    }
  });

  it("GET /policies/kinds serves the registry, without credentials", async () => {
    const res = await t.request({ method: "GET", url: "/policies/kinds" });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { kind: RuleKind; label: string; fields: string[] }[];
    assert.deepEqual(
      body.map((k) => k.kind),
      RULE_KINDS,
    );
    for (const k of body) assert.deepEqual(k.fields, [...POLICY_KINDS[k.kind].fields]);
  });
});
