/**
 * Issue 9, identity and authorization: what an unverified or look-alike email, an admin, a
 * low-budget key, an unauthenticated flood and one busy developer can no longer do. Each block
 * answers one finding, through the HTTP API, on both stores (and through Redis when set).
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { apiKeyDigest, generateApiKey } from "../src/api-keys/format.ts";
import type { Db } from "../src/db/db.ts";
import { LOCAL_AUDIENCE, LOCAL_ISSUER } from "../src/identity/tokens.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";

const shared = Boolean(process.env.REDIS_URL);
const nowSec = () => Math.floor(Date.now() / 1000);
const unique = () => randomBytes(4).toString("hex");

// Small quotas, so that finding 6 can reach them; every other test here uses fresh developers.
const QUOTA = 5;
let t: TestApp;
before(async () => {
  t = await startTestApp({
    env: { MAX_ORGS_PER_DEVELOPER: String(QUOTA), MAX_PROJECTS_PER_ORG: String(QUOTA) },
  });
});
after(() => t.close());

/** A token of the local issuer with exactly these claims (and a valid iss, aud, exp). */
function tokenWith(t: TestApp, claims: Record<string, unknown>) {
  return t.issuer.signForTest({ iss: LOCAL_ISSUER, aud: LOCAL_AUDIENCE, exp: nowSec() + 600, ...claims });
}

async function orgsOf(t: TestApp, token: string): Promise<[string, string][]> {
  const res = await t.request({ method: "GET", url: "/orgs", token });
  assert.equal(res.statusCode, 200, res.body);
  return res.json().map((o: { slug: string; role: string }) => [o.slug, o.role]);
}

async function newOrg(t: TestApp, ownerEmail: string) {
  const owner = await t.token(ownerEmail);
  const slug = `org-${unique()}`;
  const res = await t.request({ method: "POST", url: "/orgs", token: owner, payload: { name: slug, slug } });
  assert.equal(res.statusCode, 201, res.body);
  return { owner, slug };
}

async function invite(t: TestApp, slug: string, token: string, email: string, role: string) {
  return t.request({ method: "POST", url: `/orgs/${slug}/members`, token, payload: { email, role } });
}

describe("a developer's first sign-in", () => {
  it("many first requests of one new developer at once all succeed, and make one record", async () => {
    // On PostgreSQL the racing inserts used to fail on the subject's unique index: one 500 in
    // about five runs of 36 requests. Ten developers, 24 requests each, make it show every run.
    for (let round = 0; round < 10; round++) {
      const email = `first-${unique()}@example.com`;
      const token = await t.token(email);
      const statuses = await Promise.all(
        Array.from({ length: 24 }, () =>
          t.request({ method: "GET", url: "/orgs", token }).then((r) => r.statusCode),
        ),
      );
      assert.deepEqual([...new Set(statuses)], [200], `round ${round}: ${statuses.join(",")}`);
      const rows = await t.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM developers WHERE email = $1",
        [email],
      );
      assert.equal(rows[0]!.n, 1);
    }
  });
});

describe("finding 1: only a verified email claims an invitation", () => {
  it("a token whose email_verified is missing, a string, or anything but true signs in alone and claims nothing", async () => {
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    const victim = `victim-${unique()}@example.com`;
    assert.equal((await invite(t, slug, owner, victim, "admin")).statusCode, 201);
    for (const [i, verified] of [undefined, "false", "true", 1, null, {}].entries()) {
      const claims: Record<string, unknown> = { sub: `attacker-${i}-${unique()}`, email: victim };
      if (verified !== undefined) claims.email_verified = verified;
      assert.deepEqual(await orgsOf(t, await tokenWith(t, claims)), [], JSON.stringify(verified));
    }
    // The provider saying outright that the address is unverified is still refused.
    const denied = await tokenWith(t, {
      sub: `attacker-x-${unique()}`,
      email: victim,
      email_verified: false,
    });
    assert.equal((await t.request({ method: "GET", url: "/orgs", token: denied })).statusCode, 401);
    // The invitation is still there for its owner, whose provider vouches for the address.
    const members = await t.request({ method: "GET", url: `/orgs/${slug}/members`, token: owner });
    assert.equal(members.json().length, 2);
    assert.equal(members.json().find((m: { email: string }) => m.email === victim)?.role, "admin");
    assert.deepEqual(await orgsOf(t, await t.token(victim)), [[slug, "admin"]]);
  });

  it("an unverified sign-in does not take the address either: a later invitation reaches its real owner", async () => {
    const late = `late-${unique()}@example.com`;
    const squatter = await tokenWith(t, { sub: `squatter-${unique()}`, email: late });
    assert.deepEqual(await orgsOf(t, squatter), []);
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    assert.equal((await invite(t, slug, owner, late, "admin")).statusCode, 201);
    assert.deepEqual(await orgsOf(t, squatter), [], "the squatter never receives the invitation");
    assert.deepEqual(await orgsOf(t, await t.token(late)), [[slug, "admin"]]);
  });

  it("an identity that signed in unverified takes its address once the provider vouches for it", async () => {
    const email = `slow-${unique()}@example.com`;
    const sub = `slow-${unique()}`;
    assert.deepEqual(await orgsOf(t, await tokenWith(t, { sub, email })), []);
    const verified = await tokenWith(t, { sub, email, email_verified: true });
    assert.deepEqual(await orgsOf(t, verified), []);
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    assert.equal((await invite(t, slug, owner, email, "developer")).statusCode, 201);
    assert.deepEqual(await orgsOf(t, verified), [[slug, "developer"]]);
  });
});

describe("finding 2: look-alike addresses never merge", () => {
  const lookAlikes = {
    kelvin: "\u212Aim@example.com",
    dotless: "k\u0131m@example.com",
    dottedCapital: "K\u0130M@example.com",
    fullwidth: "\uFF4Bim@example.com",
    fullwidthCapital: "\uFF2B\uFF29\uFF2D@example.com",
  };

  it("a verified token for KELVIN SIGN + im, dotless ı, İ or fullwidth letters never claims kim's invitation", async () => {
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    assert.equal((await invite(t, slug, owner, "kim@example.com", "admin")).statusCode, 201);
    for (const [name, email] of Object.entries(lookAlikes)) {
      const token = await tokenWith(t, { sub: `${name}-${unique()}`, email, email_verified: true });
      assert.deepEqual(await orgsOf(t, token), [], name);
    }
    const kim = await tokenWith(t, {
      sub: `kim-${unique()}`,
      email: "Kim@Example.COM",
      email_verified: true,
    });
    assert.deepEqual(await orgsOf(t, kim), [[slug, "admin"]], "ASCII case still folds");
  });

  it("an invitation to a look-alike is refused with 400; Kim@Example.com is kim@example.com", async () => {
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    for (const [name, email] of Object.entries(lookAlikes)) {
      const res = await invite(t, slug, owner, email, "admin");
      assert.equal(res.statusCode, 400, name);
      assert.equal(res.json().code, "invalid_request");
      assert.match(res.json().detail, /ASCII/);
    }
    const mixed = await invite(t, slug, owner, `Lee-${"X"}@Example.com`, "viewer");
    assert.equal(mixed.statusCode, 201);
    assert.equal(mixed.json().email, "lee-x@example.com");
    const again = await invite(t, slug, owner, "lee-x@example.com", "viewer");
    assert.equal(again.statusCode, 200, "the same member");
    assert.equal(again.json().developer_id, mixed.json().developer_id);
    assert.deepEqual(await orgsOf(t, await t.token("LEE-X@EXAMPLE.COM")), [[slug, "viewer"]]);
  });

  it("the local issuer refuses to mint a look-alike token", async () => {
    await assert.rejects(t.issuer.issue(lookAlikes.kelvin), /ASCII/);
  });
});

describe("finding 3: only an owner changes a role, on every route", () => {
  it("an admin cannot change another member's role through POST /orgs/:orgId/members; re-posting the same role is fine", async () => {
    const { owner, slug } = await newOrg(t, `boss-${unique()}@example.com`);
    const [a, b, d] = ["a", "b", "d"].map((n) => `${n}-${unique()}@example.com`) as [string, string, string];
    assert.equal((await invite(t, slug, owner, a, "admin")).statusCode, 201);
    assert.equal((await invite(t, slug, owner, b, "admin")).statusCode, 201);
    assert.equal((await invite(t, slug, owner, d, "developer")).statusCode, 201);
    const admin = await t.token(a);
    const roles = async () =>
      Object.fromEntries(
        (await t.request({ method: "GET", url: `/orgs/${slug}/members`, token: owner }))
          .json()
          .map((m: { email: string; role: string }) => [m.email, m.role]),
      );

    for (const [email, role] of [
      [b, "viewer"],
      [b, "developer"],
      [d, "admin"],
      [d, "viewer"],
    ] as const) {
      const res = await invite(t, slug, admin, email, role);
      assert.equal(res.statusCode, 403, `${email} → ${role}`);
      assert.equal(res.json().code, "forbidden");
      assert.match(res.json().detail, /only an owner/);
    }
    assert.equal((await roles())[b], "admin");
    assert.equal((await roles())[d], "developer");

    assert.equal((await invite(t, slug, admin, b, "admin")).statusCode, 200, "same role: allowed");
    assert.equal((await invite(t, slug, admin, d, "developer")).statusCode, 200, "same role: allowed");
    assert.equal((await invite(t, slug, admin, `n-${unique()}@example.com`, "admin")).statusCode, 201);
    const byOwner = await invite(t, slug, owner, b, "viewer");
    assert.equal(byOwner.statusCode, 200, "the owner may");
    assert.equal(byOwner.json().role, "viewer");
  });
});

describe("finding 4: a key never mints a key above its own rate limit", () => {
  it("a manage key limited to 3/min cannot issue 1,000,000/min (400); up to its own limit it can", async () => {
    const p = await seedProject(t, { rateLimit: 3, scopes: ["manage"], email: `k-${unique()}@example.com` });
    const mint = (rateLimit: number, token = p.apiKey) =>
      t.request({
        method: "POST",
        url: `/projects/${p.projectId}/apikeys`,
        token,
        payload: { rateLimit, scopes: ["manage"] },
      });
    const high = await mint(1_000_000);
    assert.equal(high.statusCode, 400);
    assert.equal(high.json().code, "invalid_request");
    assert.match(high.json().detail, /rateLimit must not exceed the issuing key's own rate limit \(3 /);
    assert.equal((await mint(3)).statusCode, 201);
    const byDeveloper = await mint(1_000_000, p.ownerToken);
    assert.equal(byDeveloper.statusCode, 201, "developers keep the schema's bounds");
  });
});

/** A store whose reads of api_keys by digest are recorded. */
async function countingStore(): Promise<{ store: TestDb; digests: string[] }> {
  const store = await openTestDb();
  const digests: string[] = [];
  const db = new Proxy(store.db, {
    get(target, prop) {
      if (prop === "query") {
        return (sql: string, params?: unknown[]) => {
          if (sql.includes("FROM api_keys WHERE digest")) digests.push(String(params?.[0]));
          return target.query(sql, params);
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as Db;
  return { store: { ...store, db }, digests };
}

describe(`findings 5 and 6: budgets per client address and per developer (${shared ? "shared through Redis across two instances" : "in memory"})`, () => {
  const LIMIT = 20;
  const DEV_LIMIT = 6;
  const ATTACKER = "203.0.113.7";
  let store: TestDb;
  let digests: string[];
  let a: TestApp;
  let b: TestApp;
  before(async () => {
    ({ store, digests } = await countingStore());
    const prefix = `hi-test:${unique()}`;
    const env = {
      FAILED_AUTH_LIMIT: String(LIMIT),
      DEVELOPER_RATE_LIMIT: String(DEV_LIMIT),
      KEY_CACHE_TTL_MS: "5000",
      // One DATA_DIR: both instances trust the same local issuer.
      DATA_DIR: `memory://hi-${unique()}`,
    };
    a = await startTestApp({ db: store, rateLimitPrefix: prefix, env });
    b = shared ? await startTestApp({ db: store, rateLimitPrefix: prefix, env }) : a;
  });
  after(async () => {
    if (b !== a) await b.close();
    await a.close();
    await store.drop();
  });

  it("2,000 distinct made-up keys from one address cost at most FAILED_AUTH_LIMIT reads; its valid key keeps working", async () => {
    const p = await seedProject(a, { scopes: ["read"], email: `flood-${unique()}@example.com` });
    const get = (app: TestApp, token: string, remoteAddress = ATTACKER) =>
      app.request({ method: "GET", url: `/projects/${p.projectId}`, token, remoteAddress });
    assert.equal((await get(a, p.apiKey)).statusCode, 200);
    if (b !== a) assert.equal((await get(b, p.apiKey)).statusCode, 200);
    const validDigest = apiKeyDigest(p.apiKey);
    const before = digests.length;

    const statuses: number[] = [];
    for (let round = 0; round < 20; round++) {
      const app = round % 2 === 0 ? a : b;
      const flood = await Promise.all(Array.from({ length: 100 }, () => get(app, generateApiKey())));
      for (const res of flood) {
        statuses.push(res.statusCode);
        if (res.statusCode === 429) {
          assert.equal(res.json().code, "rate_limited");
          assert.ok(Number(res.headers["retry-after"]) >= 1 && Number(res.headers["retry-after"]) <= 60);
          assert.match(res.json().detail, /failed authentications/);
        }
      }
      const valid = await get(app, p.apiKey);
      assert.equal(valid.statusCode, 200, "the valid key from the same address is served throughout");
    }
    const unknownReads = digests.slice(before).filter((d) => d !== validDigest).length;
    const refused = statuses.filter((s) => s === 401).length;
    assert.equal(statuses.length, 2000);
    assert.equal(refused + statuses.filter((s) => s === 429).length, 2000);
    assert.equal(unknownReads, refused, "a read only for each failed authentication within the budget");
    // Exact in memory. Through Redis it is exact too unless a count times out (500 ms on a
    // loaded machine): the limiter then counts in the instance's memory, which may allow each
    // instance one budget of its own, never more.
    assert.ok(shared ? refused >= LIMIT && refused <= 3 * LIMIT : refused === LIMIT, `${refused} reads`);
    // The valid key was never pushed out of the cache: at most one re-read per instance per TTL.
    const validReads = digests.slice(before).filter((d) => d === validDigest).length;
    assert.ok(validReads <= 4, `the valid key was read ${validReads} times`);

    // Another address has its own budget.
    assert.equal((await get(a, generateApiKey(), "198.51.100.9")).statusCode, 401);
  });

  it("the same budget covers /rpc and developer tokens; valid credentials from the address still pass", async () => {
    const p = await seedProject(a, { scopes: ["sponsor"], email: `rpc-${unique()}@example.com` });
    const address = "192.0.2.77";
    const rpc = (app: TestApp, key: string) =>
      app.app.inject({
        method: "POST",
        url: `/rpc?apikey=${key}`,
        remoteAddress: address,
        headers: { "content-type": "application/json" },
        payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: [] }),
      });
    // Both instances have read the valid key once before the flood.
    for (const app of new Set([a, b])) {
      assert.equal((await rpc(app, p.apiKey)).json().error.data.code, "invalid_params");
    }
    const codes: string[] = [];
    for (let i = 0; i < LIMIT + 5; i++)
      codes.push((await rpc(i % 2 ? b : a, generateApiKey())).json().error.data.code);
    assert.deepEqual(codes.slice(0, LIMIT), Array(LIMIT).fill("unauthorized"));
    assert.deepEqual(codes.slice(LIMIT), Array(5).fill("rate_limited"));
    assert.equal(
      (await rpc(b, p.apiKey)).json().error.data.code,
      "invalid_params",
      "the valid key passes authentication on /rpc",
    );

    const forged = await tokenWith(a, { sub: "x", email: "x@example.com" });
    const bad = await a.request({
      method: "GET",
      url: "/orgs",
      token: `${forged.slice(0, -4)}AAAA`,
      remoteAddress: address,
    });
    assert.equal(bad.statusCode, 429, "an invalid token past the budget");
    assert.ok(Number(bad.headers["retry-after"]) >= 1);
    const good = await a.request({
      method: "GET",
      url: "/orgs",
      token: p.ownerToken,
      remoteAddress: address,
    });
    assert.equal(good.statusCode, 200, "a valid token from the same address");
  });

  it("invalid tokens alone exhaust an address's budget: 401 up to the limit, then 429", async () => {
    const address = "192.0.2.200";
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 3; i++) {
      const res = await (i % 2 ? b : a).request({
        method: "GET",
        url: "/orgs",
        token: `not-a-jwt-${i}`,
        remoteAddress: address,
      });
      statuses.push(res.statusCode);
    }
    assert.deepEqual(statuses, [...Array(LIMIT).fill(401), 429, 429, 429]);
  });

  it("allows DEVELOPER_RATE_LIMIT requests per minute per developer, then 429 with Retry-After", async () => {
    const busy = await a.token(`busy-${unique()}@example.com`);
    const other = await a.token(`other-${unique()}@example.com`);
    const statuses = await Promise.all(
      Array.from({ length: 3 * DEV_LIMIT }, (_, i) =>
        (i % 2 ? b : a).request({ method: "GET", url: "/orgs", token: busy }).then((r) => r.statusCode),
      ),
    );
    assert.equal(statuses.filter((s) => s === 200).length, DEV_LIMIT);
    assert.equal(statuses.filter((s) => s === 429).length, 2 * DEV_LIMIT);
    const res = await b.request({ method: "GET", url: "/orgs", token: busy });
    assert.equal(res.statusCode, 429);
    assert.equal(res.json().code, "rate_limited");
    assert.ok(Number(res.headers["retry-after"]) >= 1 && Number(res.headers["retry-after"]) <= 60);
    assert.equal(res.headers["ratelimit-policy"], `${DEV_LIMIT};w=60`);
    assert.equal((await a.request({ method: "GET", url: "/orgs", token: other })).statusCode, 200);
  });
});

describe("finding 6: quotas on organizations per developer and projects per organization", () => {
  /**
   * Exactly QUOTA creations succeed; every other one is 409 quota_exceeded, or, on PostgreSQL on
   * a loaded machine, 503 unavailable when it waited on the row lock past DB_LOCK_TIMEOUT_MS.
   */
  const assertExactlyQuota = (results: { statusCode: number; json(): { code: string } }[]) => {
    assert.equal(results.filter((r) => r.statusCode === 201).length, QUOTA);
    const refused = results
      .filter((r) => r.statusCode !== 201)
      .map((r) => `${r.statusCode} ${r.json().code}`);
    for (const r of refused) assert.match(r, /^(409 quota_exceeded|503 unavailable)$/);
    assert.ok(refused.filter((r) => r.startsWith("409")).length > 0);
  };

  it("30 concurrent organization creations with a quota of 5: exactly 5 succeed, 25 are 409 quota_exceeded", async () => {
    const token = await t.token(`quota-${unique()}@example.com`);
    const results = await Promise.all(
      Array.from({ length: 6 * QUOTA }, (_, i) => {
        const slug = `q-${unique()}-${i}`;
        return t.request({ method: "POST", url: "/orgs", token, payload: { name: slug, slug } });
      }),
    );
    assertExactlyQuota(results);
    assert.equal((await orgsOf(t, token)).length, QUOTA);
  });

  it("handing ownership on does not free the quota: it counts organizations created", async () => {
    const email = `handover-${unique()}@example.com`;
    const token = await t.token(email);
    const slugs: string[] = [];
    for (let i = 0; i < QUOTA; i++) {
      const slug = `h-${unique()}`;
      assert.equal(
        (await t.request({ method: "POST", url: "/orgs", token, payload: { name: slug, slug } })).statusCode,
        201,
      );
      slugs.push(slug);
    }
    const puppet = `puppet-${unique()}@example.com`;
    assert.equal((await invite(t, slugs[0]!, token, puppet, "owner")).statusCode, 201);
    const self = (await t.request({ method: "GET", url: `/orgs/${slugs[0]}/members`, token }))
      .json()
      .find((m: { email: string }) => m.email === email).developer_id;
    const stepDown = await t.request({
      method: "PATCH",
      url: `/orgs/${slugs[0]}/members/${self}`,
      token,
      payload: { role: "developer" },
    });
    assert.equal(stepDown.statusCode, 200);
    const slug = `h-${unique()}`;
    const sixth = await t.request({ method: "POST", url: "/orgs", token, payload: { name: slug, slug } });
    assert.equal(sixth.statusCode, 409);
    assert.equal(sixth.json().code, "quota_exceeded");
  });

  it("30 concurrent project creations in an organization with a quota of 5: exactly 5 succeed", async () => {
    const { owner, slug } = await newOrg(t, `projects-${unique()}@example.com`);
    const results = await Promise.all(
      Array.from({ length: 6 * QUOTA }, (_, i) =>
        t.request({
          method: "POST",
          url: "/projects",
          token: owner,
          payload: { id: `qp-${unique()}-${i}`, name: "P", owner: slug },
        }),
      ),
    );
    assertExactlyQuota(results);
    const projects = await t.request({ method: "GET", url: "/projects", token: owner });
    assert.equal(projects.json().length, QUOTA);
  });
});
