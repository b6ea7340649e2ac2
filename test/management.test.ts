import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

describe("organizations and members", () => {
  it("creates an organization with the caller as owner; a taken slug is 409", async () => {
    const token = await t.token("founder@example.com");
    const res = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      payload: { name: "Pixel Forge", slug: "pixel-forge" },
    });
    assert.equal(res.statusCode, 201);
    assert.deepEqual(Object.keys(res.json()).sort(), ["created_at", "id", "name", "role", "slug"]);
    assert.equal(res.json().role, "owner");
    const clash = await t.request({
      method: "POST",
      url: "/orgs",
      token,
      payload: { name: "Other", slug: "pixel-forge" },
    });
    assert.equal(clash.statusCode, 409);
    assert.equal(clash.json().code, "conflict");
    for (const slug of ["ab", "Upper", "with space", "x".repeat(49), "under_score"]) {
      const bad = await t.request({ method: "POST", url: "/orgs", token, payload: { name: "N", slug } });
      assert.equal(bad.statusCode, 400, slug);
    }
  });

  it("keeps at least one owner; only owners change roles; admins cannot grant above admin", async () => {
    const owner = await t.token("o@roles.example");
    const admin = await t.token("a@roles.example");
    await t.request({ method: "POST", url: "/orgs", token: owner, payload: { name: "R", slug: "roles" } });
    const added = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: owner,
      payload: { email: "a@roles.example", role: "admin" },
    });
    assert.equal(added.statusCode, 201);
    const members = await t.request({ method: "GET", url: "/orgs/roles/members", token: admin });
    const ownerId = members.json().find((m: { role: string }) => m.role === "owner").developer_id;

    const demoteSelf = await t.request({
      method: "PATCH",
      url: `/orgs/roles/members/${ownerId}`,
      token: owner,
      payload: { role: "admin" },
    });
    assert.equal(demoteSelf.statusCode, 409);
    assert.equal(demoteSelf.json().code, "last_owner");

    const adminGrantsOwner = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: admin,
      payload: { email: "x@roles.example", role: "owner" },
    });
    assert.equal(adminGrantsOwner.statusCode, 403);
    const adminDemotesOwner = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: admin,
      payload: { email: "o@roles.example", role: "viewer" },
    });
    assert.equal(adminDemotesOwner.statusCode, 403);
    const update = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: admin,
      payload: { email: "x@roles.example", role: "developer" },
    });
    assert.equal(update.statusCode, 201);
    // Changing an existing member's role is the owner's, on this path as on PATCH.
    const adminChangesRole = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: admin,
      payload: { email: "x@roles.example", role: "viewer" },
    });
    assert.equal(adminChangesRole.statusCode, 403);
    const again = await t.request({
      method: "POST",
      url: "/orgs/roles/members",
      token: owner,
      payload: { email: "x@roles.example", role: "viewer" },
    });
    assert.equal(again.statusCode, 200, "adding an existing member updates it");
    assert.equal(again.json().role, "viewer");

    const promote = await t.request({
      method: "PATCH",
      url: `/orgs/roles/members/${added.json().developer_id}`,
      token: owner,
      payload: { role: "owner" },
    });
    assert.equal(promote.statusCode, 200);
    const nowDemote = await t.request({
      method: "PATCH",
      url: `/orgs/roles/members/${ownerId}`,
      token: owner,
      payload: { role: "developer" },
    });
    assert.equal(nowDemote.statusCode, 200, "with a second owner the first may step down");
    // The first owner is now a developer, and the former admin an owner.
    const byDeveloper = await t.request({
      method: "PATCH",
      url: "/orgs/roles/members/999999",
      token: owner,
      payload: { role: "viewer" },
    });
    assert.equal(byDeveloper.statusCode, 403, "changing roles is for owners only");
    const missing = await t.request({
      method: "PATCH",
      url: "/orgs/roles/members/999999",
      token: admin,
      payload: { role: "viewer" },
    });
    assert.equal(missing.statusCode, 404);
  });
});

describe("projects", () => {
  it("creates with a derived deposit address, 409 when taken, lists exactly the interface's fields", async () => {
    const p = await seedProject(t, { projectId: "galaxy-run" });
    assert.match(p.depositAddress, /^0x[0-9a-fA-F]{40}$/);
    const dup = await t.request({
      method: "POST",
      url: "/projects",
      token: p.ownerToken,
      payload: { id: "galaxy-run", name: "again", owner: p.slug },
    });
    assert.equal(dup.statusCode, 409);
    const list = await t.request({ method: "GET", url: "/projects", token: p.ownerToken });
    const item = list.json().find((x: { id: string }) => x.id === "galaxy-run");
    assert.deepEqual(Object.keys(item).sort(), [
      "created_at",
      "deposit_address",
      "gas_tank_balance",
      "id",
      "name",
    ]);
    const full = await t.request({ method: "GET", url: "/projects/galaxy-run", token: p.ownerToken });
    assert.equal(full.json().owner, p.slug);
    const funding = await t.request({
      method: "GET",
      url: "/projects/galaxy-run/funding-accounts/14601",
      token: p.ownerToken,
    });
    assert.equal(
      funding.json().address,
      p.depositAddress,
      "the funding account is the project's deposit address",
    );
    const other = await seedProject(t);
    assert.notEqual(other.depositAddress, p.depositAddress, "each project gets its own address");
    const unknownChain = await t.request({
      method: "GET",
      url: "/projects/galaxy-run/funding-accounts/1",
      token: p.ownerToken,
    });
    assert.equal(unknownChain.statusCode, 404);
  });

  it("formats the balance with exact decimal arithmetic", async () => {
    const p = await seedProject(t);
    const cases: [bigint, string][] = [
      [0n, "0"],
      [1n, "0.000000000000000001"],
      [10n ** 18n, "1"],
      [1_500_000_000_000_000_000n, "1.5"],
      [123_456_789_012_345_678_901_234_567n, "123456789.012345678901234567"],
    ];
    let credited = 0n;
    for (const [amount, formatted] of cases) {
      if (amount > credited) {
        await creditDeposit(t.db, {
          projectId: p.projectId,
          reference: `fmt:${amount}`,
          amountWei: amount - credited,
        });
        credited = amount;
      }
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/balance`,
        token: p.ownerToken,
      });
      assert.deepEqual(res.json(), {
        balance: amount.toString(),
        balanceFormatted: formatted,
        currency: "S",
        // The home chain's tank, and every tank (issue 23): here the one chain served.
        chainId: 14601,
        chains: [{ chainId: 14601, balance: amount.toString(), balanceFormatted: formatted, currency: "S" }],
      });
    }
  });

  it("PATCH changes name, dailyCap and the validity TTL, within bounds", async () => {
    const p = await seedProject(t);
    const ok = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { name: "Renamed", dailyCap: "1000", validityTtlSec: 600 },
    });
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.json().daily_cap, "1000");
    assert.equal(ok.json().validity_ttl_sec, 600);
    for (const payload of [
      {},
      { validityTtlSec: 3601 },
      { validityTtlSec: 10 },
      { dailyCap: 5 },
      { dailyCap: "-1" },
      { owner: "x" },
    ]) {
      const bad = await t.request({
        method: "PATCH",
        url: `/projects/${p.projectId}`,
        token: p.ownerToken,
        payload,
      });
      assert.equal(bad.statusCode, 400, JSON.stringify(payload));
    }
    const cleared = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: null },
    });
    assert.equal(cleared.json().daily_cap, null);
  });
});

describe("API keys", () => {
  it("shows the full key once, stores only its digest, lists records without it", async () => {
    const p = await seedProject(t, { rateLimit: 120 });
    const rows = await t.db.query<{ digest: string; key_preview: string }>(
      "SELECT digest, key_preview FROM api_keys WHERE project_id = $1",
      [p.projectId],
    );
    assert.equal(rows.length, 1);
    assert.match(rows[0]!.digest, /^[0-9a-f]{64}$/);
    assert.ok(!JSON.stringify(rows).includes(p.apiKey));
    assert.equal(rows[0]!.key_preview, p.apiKey.slice(0, 12));
    const list = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
    });
    assert.ok(!list.body.includes(p.apiKey));
    assert.ok(!list.body.includes(rows[0]!.digest));
    assert.deepEqual(Object.keys(list.json()[0]).sort(), [
      "id",
      "issued_at",
      "key_preview",
      "last_used_at",
      "name",
      "rate_limit",
      "revoked_at",
      "scopes",
    ]);
    assert.equal(list.json()[0].rate_limit, 120);
    assert.deepEqual(list.json()[0].scopes, ["sponsor"]);
  });

  it("a key can never mint a key with wider scopes than its own", async () => {
    const p = await seedProject(t, { scopes: ["manage"] });
    const wider = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.apiKey,
      payload: { rateLimit: 10, scopes: ["manage", "sponsor"] },
    });
    assert.equal(wider.statusCode, 403);
    const same = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.apiKey,
      payload: { rateLimit: 10, scopes: ["manage"] },
    });
    assert.equal(same.statusCode, 201);
  });

  it("records last_used_at and refuses bad rate limits", async () => {
    const p = await seedProject(t, { scopes: ["read"] });
    await t.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.apiKey });
    const list = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
    });
    assert.ok(list.json()[0].last_used_at);
    for (const rateLimit of [0, -1, 1_000_001, 1.5, "10"]) {
      const bad = await t.request({
        method: "POST",
        url: `/projects/${p.projectId}/apikeys`,
        token: p.ownerToken,
        payload: { rateLimit },
      });
      assert.equal(bad.statusCode, 400);
    }
    const unknown = await t.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/apikeys/99999`,
      token: p.ownerToken,
    });
    assert.equal(unknown.statusCode, 404);
  });
});

describe("allowlist", () => {
  const pair = {
    targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    functionSelector: "0xA0712D68",
  };

  it("normalises, re-enables without duplicating, 404 on deleting an absent pair, checks EIP-55", async () => {
    const p = await seedProject(t);
    const url = `/projects/${p.projectId}/allowlist`;
    const first = await t.request({ method: "POST", url, token: p.ownerToken, payload: pair });
    assert.equal(first.statusCode, 201);
    assert.deepEqual(
      { t: first.json().target_contract, s: first.json().function_selector, e: first.json().enabled },
      { t: pair.targetContract.toLowerCase(), s: "0xa0712d68", e: true },
    );
    assert.equal(
      (await t.request({ method: "POST", url, token: p.ownerToken, payload: pair })).statusCode,
      200,
    );
    assert.equal(
      (await t.request({ method: "DELETE", url, token: p.ownerToken, payload: pair })).statusCode,
      200,
    );
    assert.equal(
      (await t.request({ method: "DELETE", url, token: p.ownerToken, payload: pair })).statusCode,
      404,
    );
    const list1 = await t.request({ method: "GET", url, token: p.ownerToken });
    assert.deepEqual(
      list1.json().map((e: { enabled: boolean }) => e.enabled),
      [false],
    );
    assert.equal(
      (await t.request({ method: "POST", url, token: p.ownerToken, payload: pair })).statusCode,
      200,
    );
    const list2 = await t.request({ method: "GET", url, token: p.ownerToken });
    assert.deepEqual(
      list2.json().map((e: { enabled: boolean }) => e.enabled),
      [true],
    );
    const badChecksum = { ...pair, targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aA3" };
    const res = await t.request({ method: "POST", url, token: p.ownerToken, payload: badChecksum });
    assert.equal(res.statusCode, 400);
    assert.match(res.json().detail, /checksum/);
    for (const payload of [
      { ...pair, functionSelector: "0x1234" },
      { ...pair, targetContract: "0x1234" },
      { targetContract: pair.targetContract },
    ]) {
      assert.equal((await t.request({ method: "POST", url, token: p.ownerToken, payload })).statusCode, 400);
    }
  });

  it("holds at most 1,000 entries per project, with a clear error past it", async () => {
    const p = await seedProject(t);
    await t.db.query(
      `INSERT INTO allowlist_entries (project_id, target_contract, function_selector)
       SELECT $1, '0x5fbdb2315678afecb367f032d93f642f64180aa3', '0x' || lpad(to_hex(g), 8, '0')
       FROM generate_series(1, 1000) AS g`,
      [p.projectId],
    );
    const res = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/allowlist`,
      token: p.ownerToken,
      payload: pair,
    });
    assert.equal(res.statusCode, 409);
    assert.equal(res.json().code, "allowlist_full");
  });
});

describe("analytics events", () => {
  it("pages newest first with limit 1–200 (default 50) and refuses values outside", async () => {
    const p = await seedProject(t);
    const url = `/projects/${p.projectId}/analytics/events`;
    const empty = await t.request({ method: "GET", url, token: p.ownerToken });
    assert.deepEqual(empty.json(), { events: [], total: 0 });
    for (const q of ["limit=0", "limit=201", "limit=abc", "offset=-1", "limit=1.5", "foo=bar"]) {
      const res = await t.request({ method: "GET", url: `${url}?${q}`, token: p.ownerToken });
      assert.equal(res.statusCode, 400, q);
    }
    assert.equal(
      (await t.request({ method: "GET", url: `${url}?limit=200`, token: p.ownerToken })).statusCode,
      200,
    );

    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `events:${p.projectId}`,
      amountWei: 10n ** 18n,
    });
    await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/allowlist`,
      token: p.ownerToken,
      payload: {
        targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        functionSelector: "0xa0712d68",
      },
    });
    for (let i = 1; i <= 3; i++) {
      const res = await t.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: {
          projectId: p.projectId,
          user: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
          target: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
          selector: "0xa0712d68",
          estimatedGas: 1000 * i,
          chainId: 14601,
        },
      });
      assert.equal(res.statusCode, 200);
    }
    const page = await t.request({ method: "GET", url: `${url}?limit=2&offset=0`, token: p.ownerToken });
    assert.equal(page.json().total, 3);
    assert.deepEqual(
      page.json().events.map((e: { estimated_gas: number }) => e.estimated_gas),
      [3000, 2000],
    );
    assert.ok(
      page
        .json()
        .events.every(
          (e: { status: string; actual_gas: number }) => e.status === "pending" && e.actual_gas === 0,
        ),
    );
    const next = await t.request({ method: "GET", url: `${url}?limit=2&offset=2`, token: p.ownerToken });
    assert.deepEqual(
      next.json().events.map((e: { estimated_gas: number }) => e.estimated_gas),
      [1000],
    );
  });
});

describe("path and query values", () => {
  it("are refused unless they are exactly the declared integer or boolean (no blank, spaces or exponents)", async () => {
    const p = await seedProject(t);
    for (const q of ["offset=%20", "offset=", "limit=1e2", "limit=%2010", "limit=010", "offset=0x10"]) {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/events?${q}`,
        token: p.ownerToken,
      });
      assert.equal(res.statusCode, 400, q);
    }
    const drift = await t.request({
      method: "GET",
      url: "/projects/funds/parity-report?onlyDrift=1",
      token: p.ownerToken,
    });
    assert.equal(drift.statusCode, 400);
    const chain = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funding-accounts/%2014601`,
      token: p.ownerToken,
    });
    assert.equal(chain.statusCode, 400);
    const ok = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/events?limit=10&offset=0`,
      token: p.ownerToken,
    });
    assert.equal(ok.statusCode, 200);
  });
});
