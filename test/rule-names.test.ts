/**
 * Rules by name (issue 24): API keys, policy rules and allowlist entries carry a studio's own
 * name; policy rules and allowlist entries can be paused and resumed without being deleted, and
 * a paused one refuses (or allows) nothing while keeping its settings and counters.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  type TestApp,
} from "./support/app.ts";

let t: TestApp;
let p: Awaited<ReturnType<typeof fundedProject>>;
let other: Awaited<ReturnType<typeof fundedProject>>;

before(async () => {
  t = await startTestApp();
  p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 20n);
  other = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 20n, {
    email: "other@example.com",
  });
});
after(() => t.close());

let senders = 0;
const freshSender = () => `0x${(0xabc000 + ++senders).toString(16).padStart(40, "0")}`;

const authorize = (user = freshSender()) => authorizeMint(t, p, user);

const call = (
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
  url: string,
  payload?: object,
  token?: string,
) => t.request({ method, url, token: token ?? p.ownerToken, ...(payload ? { payload } : {}) });

/** Names the API refuses, each with why. */
const BAD_NAMES: [string, unknown][] = [
  ["empty", ""],
  ["129 characters", "x".repeat(129)],
  ["a newline", "Mint\nkey"],
  ["a NUL", "Mint\u0000"],
  ["DEL", "Mint\u007f"],
  ["not a string", 7],
];

describe("named API keys", () => {
  test("a key is created with a name, listed with it, renamed, and its name removed; the full key is never listed", async () => {
    const created = await call("POST", `/projects/${p.projectId}/apikeys`, {
      rateLimit: 60,
      name: "Game server (EU) ✓",
    });
    assert.equal(created.statusCode, 201, created.body);
    const key = created.json() as { id: number; name: string; apiKey: string };
    assert.equal(key.name, "Game server (EU) ✓");
    const listed = () =>
      call("GET", `/projects/${p.projectId}/apikeys`).then(
        (r) => (r.json() as { id: number; name: string | null }[]).find((k) => k.id === key.id)!,
      );
    assert.equal((await listed()).name, "Game server (EU) ✓");
    const list = await call("GET", `/projects/${p.projectId}/apikeys`);
    assert.ok(!list.body.includes(key.apiKey), "the full key is never listed");

    const renamed = await call("PATCH", `/projects/${p.projectId}/apikeys/${key.id}`, {
      name: "Game server (US)",
    });
    assert.equal(renamed.statusCode, 200, renamed.body);
    assert.equal((await listed()).name, "Game server (US)");
    assert.equal(
      (await call("PATCH", `/projects/${p.projectId}/apikeys/${key.id}`, { name: null })).statusCode,
      200,
    );
    assert.equal((await listed()).name, null);
    // Keys created without a name have none, as before.
    const plain = await call("POST", `/projects/${p.projectId}/apikeys`, { rateLimit: 60 });
    assert.equal((plain.json() as { name: string | null }).name, null);
  });

  test("bad names are 400 and change nothing; another project's key is 404; a stranger is 404 and a sponsor key 403", async () => {
    const created = await call("POST", `/projects/${p.projectId}/apikeys`, { rateLimit: 60, name: "keep" });
    const id = (created.json() as { id: number }).id;
    for (const [why, name] of BAD_NAMES) {
      const res = await call("PATCH", `/projects/${p.projectId}/apikeys/${id}`, { name });
      assert.equal(res.statusCode, 400, `${why}: ${res.body}`);
      assert.equal((res.json() as { code: string }).code, "invalid_request", why);
      const onCreate = await call("POST", `/projects/${p.projectId}/apikeys`, { rateLimit: 60, name });
      assert.equal(onCreate.statusCode, 400, `${why} on create`);
    }
    assert.equal((await call("PATCH", `/projects/${p.projectId}/apikeys/${id}`, {})).statusCode, 400);
    const listed = (await call("GET", `/projects/${p.projectId}/apikeys`)).json() as {
      id: number;
      name: string;
    }[];
    assert.equal(listed.find((k) => k.id === id)?.name, "keep");
    const across = await call(
      "PATCH",
      `/projects/${other.projectId}/apikeys/${id}`,
      { name: "x" },
      other.ownerToken,
    );
    assert.equal(across.statusCode, 404);
    const stranger = await call(
      "PATCH",
      `/projects/${p.projectId}/apikeys/${id}`,
      { name: "x" },
      other.ownerToken,
    );
    assert.equal(stranger.statusCode, 404, "another tenant is not told the project exists");
    const byKey = await call("PATCH", `/projects/${p.projectId}/apikeys/${id}`, { name: "x" }, p.apiKey);
    assert.equal(byKey.statusCode, 403, "a sponsor key cannot rename keys");
  });
});

describe("policy rules by name, paused and resumed", () => {
  test("a paused cap refuses nothing and keeps its counters; resumed, it refuses again; renaming keeps everything", async () => {
    const put = await call("PUT", `/projects/${p.projectId}/policies/one-each`, {
      kind: "sender_count_cap",
      maxOperations: 1,
      window: "lifetime",
      name: "One free mint per player",
    });
    assert.equal(put.statusCode, 201, put.body);
    assert.deepEqual(
      (({ name, paused }) => ({ name, paused }))(put.json() as { name: string; paused: boolean }),
      { name: "One free mint per player", paused: false },
    );
    const player = freshSender();
    assert.equal((await authorize(player)).statusCode, 200);
    const refused = await authorize(player);
    assert.equal(refused.statusCode, 403, refused.body);
    assert.equal((refused.json() as { code: string }).code, "sender_cap_exceeded");

    const paused = await call("PATCH", `/projects/${p.projectId}/policies/one-each`, { paused: true });
    assert.equal(paused.statusCode, 200, paused.body);
    assert.equal((paused.json() as { paused: boolean; name: string }).paused, true);
    assert.equal(
      (paused.json() as { name: string }).name,
      "One free mint per player",
      "pausing keeps the name",
    );
    assert.equal((await authorize(player)).statusCode, 200, "paused: the cap refuses nothing");

    const usage = async () =>
      (
        (await call("GET", `/projects/${p.projectId}/policies/one-each/usage`)).json() as {
          subject: string;
          operations: number;
        }[]
      ).find((u) => u.subject === player)?.operations;
    const counted = await usage();
    assert.ok(counted !== undefined && counted >= 1, "the counters are kept while paused");

    const renamed = await call("PATCH", `/projects/${p.projectId}/policies/one-each`, {
      name: "First mint free",
    });
    assert.equal((renamed.json() as { paused: boolean }).paused, true, "renaming keeps it paused");
    assert.equal(await usage(), counted, "renaming keeps the counters");

    assert.equal(
      (await call("PATCH", `/projects/${p.projectId}/policies/one-each`, { paused: false })).statusCode,
      200,
    );
    const again = await authorize(player);
    assert.equal(again.statusCode, 403, "resumed: the cap refuses again, on what it had counted");
    const rules = (await call("GET", `/projects/${p.projectId}/policies`)).json() as {
      id: string;
      name: string | null;
      paused: boolean;
    }[];
    assert.deepEqual(
      rules.filter((r) => r.id === "one-each").map(({ name, paused }) => ({ name, paused })),
      [{ name: "First mint free", paused: false }],
    );
    await call("DELETE", `/projects/${p.projectId}/policies/one-each`);
  });

  test("a paused blocklist blocks no one; a rule stored paused with PUT starts paused", async () => {
    const player = freshSender();
    const put = await call("PUT", `/projects/${p.projectId}/policies/banned`, {
      kind: "sender_blocklist",
      senders: [player],
      name: "Cheaters",
      paused: true,
    });
    assert.equal(put.statusCode, 201, put.body);
    assert.equal((await authorize(player)).statusCode, 200);
    await call("PATCH", `/projects/${p.projectId}/policies/banned`, { paused: false });
    const blocked = await authorize(player);
    assert.equal(blocked.statusCode, 403);
    assert.equal((blocked.json() as { code: string }).code, "sender_blocked");
    await call("DELETE", `/projects/${p.projectId}/policies/banned`);
  });

  test("bad changes are refused with their codes and change nothing", async () => {
    await call("PUT", `/projects/${p.projectId}/policies/keep`, {
      kind: "project_count_cap",
      maxOperations: 1000,
      window: "day",
      name: "keep",
    });
    for (const [why, name] of BAD_NAMES) {
      const res = await call("PATCH", `/projects/${p.projectId}/policies/keep`, { name });
      assert.equal(res.statusCode, 400, `${why}: ${res.body}`);
    }
    const cases: [string, string, object, number, string][] = [
      ["nothing to change", "keep", {}, 400, "invalid_request"],
      ["an unknown field", "keep", { maxOperations: 1 }, 400, "invalid_request"],
      ["paused not a boolean", "keep", { paused: "yes" }, 400, "invalid_request"],
      ["the daily cap", "daily_cap", { paused: true }, 400, "invalid_policy"],
      ["no such rule", "nope", { paused: true }, 404, "not_found"],
    ];
    for (const [why, id, body, status, code] of cases) {
      const res = await call("PATCH", `/projects/${p.projectId}/policies/${id}`, body);
      assert.equal(res.statusCode, status, `${why}: ${res.body}`);
      assert.equal((res.json() as { code: string }).code, code, why);
    }
    const stranger = await call(
      "PATCH",
      `/projects/${p.projectId}/policies/keep`,
      { paused: true },
      other.ownerToken,
    );
    assert.equal(stranger.statusCode, 404, "another tenant is not told the project exists");
    const rule = (
      (await call("GET", `/projects/${p.projectId}/policies`)).json() as {
        id: string;
        name: string;
        paused: boolean;
      }[]
    ).find((r) => r.id === "keep")!;
    assert.deepEqual({ name: rule.name, paused: rule.paused }, { name: "keep", paused: false });
    await call("DELETE", `/projects/${p.projectId}/policies/keep`);
  });
});

describe("allowlist entries by name, paused and resumed", () => {
  const pair = { targetContract: MINT_TARGET, functionSelector: MINT_SELECTOR };

  test("an entry is named, paused (its calls refused) and resumed without being removed", async () => {
    const named = await call("POST", `/projects/${p.projectId}/allowlist`, {
      ...pair,
      name: "Mint on the game",
    });
    assert.equal(named.statusCode, 200, "re-adding an existing pair names it");
    assert.equal((named.json() as { name: string }).name, "Mint on the game");

    const paused = await call("PATCH", `/projects/${p.projectId}/allowlist`, { ...pair, enabled: false });
    assert.equal(paused.statusCode, 200, paused.body);
    assert.deepEqual(
      (({ name, enabled }) => ({ name, enabled }))(paused.json() as { name: string; enabled: boolean }),
      { name: "Mint on the game", enabled: false },
    );
    const refused = await authorize();
    assert.equal(refused.statusCode, 403);
    assert.equal((refused.json() as { code: string }).code, "not_allowlisted");

    await call("PATCH", `/projects/${p.projectId}/allowlist`, { ...pair, enabled: true, name: "Mint" });
    assert.equal((await authorize()).statusCode, 200);
    const list = (await call("GET", `/projects/${p.projectId}/allowlist`)).json() as {
      name: string;
      enabled: boolean;
    }[];
    assert.deepEqual(
      list.map(({ name, enabled }) => ({ name, enabled })),
      [{ name: "Mint", enabled: true }],
    );
    // A checksummed address names the same entry; null removes the name.
    const cleared = await call("PATCH", `/projects/${p.projectId}/allowlist`, {
      targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
      functionSelector: MINT_SELECTOR.toUpperCase().replace("0X", "0x"),
      name: null,
    });
    assert.equal(cleared.statusCode, 200, cleared.body);
    assert.equal((cleared.json() as { name: string | null }).name, null);
  });

  test("bad changes are refused with their codes and change nothing", async () => {
    const cases: [string, object, number][] = [
      ["nothing to change", pair, 400],
      ["no such pair", { ...pair, functionSelector: "0x12345678", enabled: false }, 404],
      [
        "a bad checksum",
        { ...pair, targetContract: "0x5FbDB2315678afecb367f032d93F642f64180aA3", enabled: false },
        400,
      ],
      ["a bad name", { ...pair, name: "a\tb" }, 400],
      ["an unknown field", { ...pair, enabled: false, rateLimit: 1 }, 400],
    ];
    for (const [why, body, status] of cases) {
      const res = await call("PATCH", `/projects/${p.projectId}/allowlist`, body);
      assert.equal(res.statusCode, status, `${why}: ${res.body}`);
      assert.match(res.headers["content-type"] as string, /application\/problem\+json/);
    }
    const stranger = await call(
      "PATCH",
      `/projects/${p.projectId}/allowlist`,
      { ...pair, enabled: false },
      other.ownerToken,
    );
    assert.equal(stranger.statusCode, 404, "another tenant is not told the project exists");
    assert.equal((await authorize()).statusCode, 200, "the entry is still enabled");
  });
});
