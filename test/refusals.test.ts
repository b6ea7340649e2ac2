/**
 * The refusal log (src/refusals): every refused sponsorship request made with a project's key is
 * counted exactly per day and code and kept with what was asked in a bounded sample; nothing is
 * written per request (the recorder writes in batches); another tenant's refusals and requests
 * without a valid key are never attributed to a project.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { encodeFunctionData, numberToHex, parseAbi } from "viem";
import { fixedFeeOracle } from "../src/chains/fee-oracle.ts";
import { forgetOldRefusals } from "../src/retention/refusals.ts";
import { fundedProject, seedProject, startTestApp, type TestApp } from "./support/app.ts";

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const OTHER = "0x00000000000000000000000000000000000000c0";
const MINT = "0xa0712d68";
const GAS = 150_000;
const DETAIL_PER_MINUTE = 10;
// Noon UTC, so that a burst stays in one minute and one day whatever the machine's speed.
let clock = Date.UTC(2030, 4, 6, 12, 0, 0);

let t: TestApp;
before(async () => {
  t = await startTestApp({
    now: () => clock,
    // The timer never fires during a test: each test flushes when it wants the rows.
    env: { REFUSAL_FLUSH_MS: "60000", REFUSAL_DETAIL_PER_MINUTE: String(DETAIL_PER_MINUTE) },
  });
});
after(() => t.close());
// Each test starts in a minute of its own, so that one test's sample does not fill the next's.
beforeEach(() => {
  clock += 60_000;
});

const sender = (n: number) => `0x${n.toString(16).padStart(40, "0")}`;

function authorize(apiKey: string, projectId: string, extra: Record<string, unknown> = {}) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: apiKey,
    payload: {
      projectId,
      user: sender(1),
      target: GAME,
      selector: MINT,
      estimatedGas: GAS,
      chainId: 14601,
      ...extra,
    },
  });
}

async function refusals(token: string, projectId: string, query = "") {
  const res = await t.request({ method: "GET", url: `/projects/${projectId}/refusals${query}`, token });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as { refusals: Record<string, unknown>[]; nextCursor?: string };
}

async function counts(token: string, projectId: string, query = "") {
  const res = await t.request({
    method: "GET",
    url: `/projects/${projectId}/analytics/refusals${query}`,
    token,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json() as {
    refused: number;
    authorized: number;
    byCode: { code: string; reason: string; refused: number }[];
    days: { day: string; refused: number; authorized: number; byCode: Record<string, number> }[];
  };
}

async function storedRefusals(): Promise<number> {
  const [row] = await t.db.query<{ n: string }>(
    "SELECT (SELECT count(*) FROM refusals) + (SELECT COALESCE(sum(refused), 0) FROM refusal_days) AS n",
  );
  return Number(row!.n);
}

const account = parseAbi(["function execute(address dest, uint256 value, bytes func)"]);
const game = parseAbi(["function mint(uint256 itemId)"]);
function rpc(apiKey: string, method: string, target: string, user = sender(7)) {
  const op = {
    sender: user,
    nonce: "0x0",
    callData: encodeFunctionData({
      abi: account,
      functionName: "execute",
      args: [
        target as `0x${string}`,
        0n,
        encodeFunctionData({ abi: game, functionName: "mint", args: [7n] }),
      ],
    }),
    callGasLimit: numberToHex(80_000),
    verificationGasLimit: numberToHex(60_000),
    preVerificationGas: numberToHex(50_000),
    maxFeePerGas: numberToHex(2_000_000_000),
    maxPriorityFeePerGas: numberToHex(1_000_000_000),
    signature: "0x",
  };
  return t.app.inject({
    method: "POST",
    url: "/rpc",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method,
      params: [op, "0x0000000071727de22e5e9d8baf0edac6f37da032", "0x3909", {}],
    }),
  });
}

describe("refusals are recorded per project, in batches", () => {
  it("records each kind of refusal (REST and JSON-RPC) with its code, status, route, key and what was asked", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 0n);
    const blocked = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/policies/banned`,
      token: p.ownerToken,
      payload: { kind: "sender_blocklist", senders: [sender(9)] },
    });
    assert.equal(blocked.statusCode, 201, blocked.body);
    const before = await storedRefusals();

    assert.equal((await authorize(p.apiKey, p.projectId, { target: OTHER })).statusCode, 403);
    assert.equal((await authorize(p.apiKey, p.projectId, { user: sender(9) })).statusCode, 403);
    assert.equal((await authorize(p.apiKey, p.projectId)).statusCode, 402);
    assert.equal((await authorize(p.apiKey, p.projectId, { estimatedGas: "lots" })).statusCode, 400);
    const stub = (await rpc(p.apiKey, "pm_getPaymasterStubData", OTHER)).json();
    assert.equal(stub.error.data.code, "not_allowlisted", JSON.stringify(stub));
    const final = (await rpc(p.apiKey, "pm_getPaymasterData", GAME, sender(9))).json();
    assert.equal(final.error.data.code, "sender_blocked", JSON.stringify(final));

    // Nothing is written on the request path: the rows appear with the batch.
    assert.equal(await storedRefusals(), before);
    await t.services.refusals.flush();

    const { refusals: rows } = await refusals(p.ownerToken, p.projectId);
    const byRoute = rows.map((r) => [r.route, r.code, r.status]).reverse();
    assert.deepEqual(byRoute, [
      ["authorize", "not_allowlisted", 403],
      ["authorize", "sender_blocked", 403],
      ["authorize", "insufficient_balance", 402],
      ["authorize", "invalid_request", 400],
      ["pm_getPaymasterStubData", "not_allowlisted", 200],
      ["pm_getPaymasterData", "sender_blocked", 200],
    ]);
    const [rpcBlocked, rpcStub, , insufficient, restBlocked, notAllowlisted] = rows;
    assert.deepEqual(
      {
        sender: notAllowlisted!.sender,
        target: notAllowlisted!.target,
        selector: notAllowlisted!.selector,
        chain: notAllowlisted!.chain_id,
        gas: notAllowlisted!.estimated_gas,
      },
      { sender: sender(1), target: OTHER, selector: MINT, chain: 14601, gas: String(GAS) },
    );
    assert.equal(restBlocked!.rule_id, "banned");
    assert.equal(
      insufficient!.reason,
      "The gas tank does not hold enough to pay for the operation: top it up.",
    );
    assert.equal(typeof notAllowlisted!.api_key_id, "number");
    assert.equal(typeof notAllowlisted!.request_id, "string");
    assert.equal(rpcStub!.rpc_code, -32000);
    assert.equal(rpcStub!.sender, sender(7));
    assert.equal(rpcStub!.estimated_gas, String(80_000 + 60_000 + 50_000));
    assert.equal(rpcStub!.chain_id, 14601);
    assert.equal(rpcBlocked!.rule_id, "banned");

    const c = await counts(p.ownerToken, p.projectId);
    assert.equal(c.refused, 6);
    assert.deepEqual(
      c.byCode.map((b) => [b.code, b.refused]),
      [
        ["not_allowlisted", 2],
        ["sender_blocked", 2],
        ["insufficient_balance", 1],
        ["invalid_request", 1],
      ],
    );
    const today = c.days.at(-1)!;
    assert.equal(today.day, "2030-05-06");
    assert.deepEqual(today.byCode, {
      insufficient_balance: 1,
      invalid_request: 1,
      not_allowlisted: 2,
      sender_blocked: 2,
    });
  });

  it("filters by code and time, pages by cursor, and answers a key of the project with the read scope", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 0n);
    for (let i = 0; i < 3; i++) await authorize(p.apiKey, p.projectId, { target: OTHER });
    clock += 1000;
    await authorize(p.apiKey, p.projectId);
    await t.services.refusals.flush();
    const only = await refusals(p.ownerToken, p.projectId, "?code=not_allowlisted");
    assert.deepEqual(new Set(only.refusals.map((r) => r.code)), new Set(["not_allowlisted"]));
    assert.equal(only.refusals.length, 3);
    const since = new Date(clock).toISOString();
    assert.deepEqual(
      (await refusals(p.ownerToken, p.projectId, `?from=${since}`)).refusals.map((r) => r.code),
      ["insufficient_balance"],
    );
    const first = await refusals(p.ownerToken, p.projectId, "?limit=3");
    assert.equal(first.refusals.length, 3);
    assert.ok(first.nextCursor);
    const second = await refusals(p.ownerToken, p.projectId, `?limit=3&cursor=${first.nextCursor}`);
    assert.equal(second.refusals.length, 1);
    assert.equal(second.nextCursor, undefined);
    const ids = [...first.refusals, ...second.refusals].map((r) => r.id);
    assert.equal(new Set(ids).size, 4);
    const reader = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
      payload: { rateLimit: 100, scopes: ["read"] },
    });
    assert.equal((await refusals(reader.json().apiKey, p.projectId)).refusals.length, 4);
  });

  it("never shows another tenant's refusals, and never attributes a request without a valid key", async () => {
    const a = await fundedProject(t, { target: GAME, selector: MINT }, 0n, { email: "a@example.com" });
    const b = await fundedProject(t, { target: GAME, selector: MINT }, 0n, { email: "b@example.com" });
    await authorize(b.apiKey, b.projectId, { target: OTHER });
    // A's key naming B's project is A's refusal (A's key made it), never B's.
    assert.equal((await authorize(a.apiKey, b.projectId)).statusCode, 401);
    await t.services.refusals.flush();
    assert.deepEqual(
      (await refusals(a.ownerToken, a.projectId)).refusals.map((r) => r.code),
      ["unauthorized"],
    );
    assert.deepEqual(
      (await refusals(b.ownerToken, b.projectId)).refusals.map((r) => r.code),
      ["not_allowlisted"],
    );
    for (const url of [`/projects/${b.projectId}/refusals`, `/projects/${b.projectId}/analytics/refusals`]) {
      assert.equal((await t.request({ method: "GET", url, token: a.ownerToken })).statusCode, 404);
      assert.equal((await t.request({ method: "GET", url, token: a.apiKey })).statusCode, 404);
    }

    const before = await storedRefusals();
    const badKey = `gsk_${"A".repeat(38)}`;
    for (const [token, payload] of [
      [badKey, { projectId: b.projectId }],
      [undefined, { projectId: b.projectId }],
      ["not-a-token", { projectId: b.projectId }],
    ] as const) {
      const res = await t.request({
        method: "POST",
        url: "/sponsor/authorize",
        ...(token ? { token } : {}),
        payload: {
          ...payload,
          user: sender(1),
          target: OTHER,
          selector: MINT,
          estimatedGas: GAS,
          chainId: 14601,
        },
      });
      assert.equal(res.statusCode, 401, res.body);
    }
    const anonymous = await t.app.inject({
      method: "POST",
      url: "/rpc",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: [] }),
    });
    assert.equal(anonymous.json().error.data.code, "unauthorized");
    await t.services.refusals.flush();
    assert.equal(await storedRefusals(), before);
  });

  it("a burst of 2,000 refusals: counts exact, detailed rows within the per-minute bound", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 0n, { rateLimit: 50 });
    const codes = new Map<string, number>();
    for (let wave = 0; wave < 20; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, () => authorize(p.apiKey, p.projectId, { target: OTHER })),
      );
      for (const res of answers) {
        const code = res.json().code as string;
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }
    // Within the key's budget the allowlist refuses; past it, the rate limit does.
    assert.ok((codes.get("rate_limited") ?? 0) > 0, JSON.stringify([...codes]));
    await t.services.refusals.flush();
    const c = await counts(p.ownerToken, p.projectId);
    assert.equal(c.refused, 2000);
    assert.deepEqual(Object.fromEntries(c.byCode.map((b) => [b.code, b.refused])), Object.fromEntries(codes));
    const [row] = await t.db.query<{ n: string }>(
      "SELECT count(*) AS n FROM refusals WHERE project_id = $1",
      [p.projectId],
    );
    assert.equal(Number(row!.n), DETAIL_PER_MINUTE);
    // The next minute has room again.
    clock += 60_000;
    await authorize(p.apiKey, p.projectId, { target: OTHER });
    await t.services.refusals.flush();
    const [next] = await t.db.query<{ n: string }>(
      "SELECT count(*) AS n FROM refusals WHERE project_id = $1",
      [p.projectId],
    );
    assert.equal(Number(next!.n), DETAIL_PER_MINUTE + 1);
  });

  it("writes what an instance buffered when it stops, and keeps counts after the details' retention", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 0n);
    const other = await startTestApp({
      db: { db: t.db, schema: null, drop: async () => {} },
      now: () => clock,
      env: { REFUSAL_FLUSH_MS: "60000" },
    });
    try {
      const res = await other.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: {
          projectId: p.projectId,
          user: sender(1),
          target: OTHER,
          selector: MINT,
          estimatedGas: GAS,
          chainId: 14601,
        },
      });
      assert.equal(res.statusCode, 403);
    } finally {
      await other.close();
    }
    assert.equal((await refusals(p.ownerToken, p.projectId)).refusals.length, 1);

    // Past REFUSAL_RETENTION_DAYS (14) the detail goes; the day's count stays.
    const removed = await forgetOldRefusals(t.db, clock + 15 * 86_400_000, 14, 100_000);
    assert.ok(removed >= 1);
    assert.equal((await refusals(p.ownerToken, p.projectId)).refusals.length, 0);
    assert.equal((await counts(p.ownerToken, p.projectId)).refused, 1);
  });

  it("records 503s and the dry run's own refusals, written when that instance stops", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 10n ** 18n);
    const reader = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
      payload: { rateLimit: 100, scopes: ["read"] },
    });
    // An instance whose fee oracle has no reading: authorize answers 503 fee_oracle_stale.
    const stale = await startTestApp({
      db: { db: t.db, schema: null, drop: async () => {} },
      now: () => clock,
      feeOracle: fixedFeeOracle(null),
      env: { REFUSAL_FLUSH_MS: "60000" },
    });
    const body = {
      projectId: p.projectId,
      user: sender(1),
      target: GAME,
      selector: MINT,
      estimatedGas: GAS,
      chainId: 14601,
    };
    try {
      const res = await stale.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: body,
      });
      assert.equal(res.statusCode, 503, res.body);
      const check = await stale.request({
        method: "POST",
        url: "/sponsor/check",
        token: reader.json().apiKey,
        payload: body,
      });
      assert.equal(check.statusCode, 403, check.body);
    } finally {
      await stale.close();
    }
    const rows = (await refusals(p.ownerToken, p.projectId)).refusals;
    assert.deepEqual(
      rows.map((r) => [r.route, r.code, r.status]),
      [
        ["check", "forbidden", 403],
        ["authorize", "fee_oracle_stale", 503],
      ],
    );
    assert.notEqual(rows[0]!.api_key_id, rows[1]!.api_key_id);
  });

  it("a batch the store refuses keeps its counts for the next one", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 0n);
    for (let i = 0; i < 3; i++) await authorize(p.apiKey, p.projectId, { target: OTHER });
    // The store cannot take the batch: the counts' table is away.
    await t.db.query("ALTER TABLE refusal_days RENAME TO refusal_days_away");
    try {
      await assert.rejects(t.services.refusals.flush());
    } finally {
      await t.db.query("ALTER TABLE refusal_days_away RENAME TO refusal_days");
    }
    await authorize(p.apiKey, p.projectId, { target: OTHER });
    await t.services.refusals.flush();
    assert.equal((await counts(p.ownerToken, p.projectId)).refused, 4);
    assert.equal((await refusals(p.ownerToken, p.projectId)).refusals.length, 4);
  });

  it("the granted path records nothing", async () => {
    const p = await fundedProject(t, { target: GAME, selector: MINT }, 10n ** 18n);
    assert.equal((await authorize(p.apiKey, p.projectId)).statusCode, 200);
    await t.services.refusals.flush();
    const c = await counts(p.ownerToken, p.projectId);
    assert.deepEqual([c.refused, c.authorized], [0, 1]);
  });
});

describe("the refusal routes refuse bad parameters with problem+json", () => {
  it("answers 400 with a stable code", async () => {
    const p = await seedProject(t);
    const cases: [string, string][] = [
      ["/refusals?code=nope", "invalid_request"],
      ["/refusals?limit=0", "invalid_request"],
      ["/refusals?limit=201", "invalid_request"],
      ["/refusals?cursor=abc", "invalid_cursor"],
      ["/refusals?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z", "invalid_request"],
      ["/refusals?from=yesterday", "invalid_request"],
      ["/refusals?sender=0x1", "invalid_request"],
      ["/analytics/refusals?from=2030-01-02&to=2030-01-01", "invalid_request"],
      ["/analytics/refusals?from=2020-01-01&to=2030-01-01", "invalid_request"],
      ["/analytics/refusals?days=x", "invalid_request"],
    ];
    for (const [path, code] of cases) {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}${path}`,
        token: p.ownerToken,
      });
      assert.equal(res.statusCode, 400, `${path}: ${res.body}`);
      assert.match(String(res.headers["content-type"]), /^application\/problem\+json/);
      assert.equal(res.json().code, code, path);
    }
  });
});
