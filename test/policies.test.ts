/**
 * Sponsorship policies (issue 11) on the store the suite runs on (PGlite, or PostgreSQL with
 * DATABASE_URL): every cap exact under 500 concurrent requests across two instances; windows
 * that reset at their UTC boundaries on an injected clock; refusals that name their rule on REST
 * and JSON-RPC; the dry run; what settlement and release give back; malformed rules refused with
 * nothing changed; per-sender analytics.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { encodeFunctionData, numberToHex, parseAbi } from "viem";
import type { Db } from "../src/db/db.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { billOperation, creditDeposit, release } from "../src/ledger/ledger.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";

const GAME = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const MINT = "0xa0712d68";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";
// TEST_FEES (1 gwei base, 1 gwei priority) give a fee ceiling of 2.5 gwei.
const GAS = 150_000;
const COST = BigInt(GAS) * 2_500_000_000n;
const T0 = Date.UTC(2030, 0, 1, 12); // Tuesday 1 January 2030, 12:00 UTC

let clock = T0;
const now = () => clock;
let store: TestDb;
let secondDb: Db | null = null;
let a: TestApp;
let b: TestApp;

before(async () => {
  store = await openTestDb();
  a = await startTestApp({ db: store, now });
  // A second instance on the same store: on PostgreSQL with its own pool on the same schema; on
  // PGlite (one process, one database) over the same Db object.
  const url = process.env.DATABASE_URL;
  if (url && store.schema) {
    secondDb = await openPostgres({ url, schema: store.schema });
    b = await startTestApp({ db: { db: secondDb, schema: store.schema, drop: async () => {} }, now });
  } else {
    b = await startTestApp({ db: { ...store, drop: async () => {} }, now });
  }
});
after(async () => {
  await b.close();
  await a.close();
  await secondDb?.close();
  await store.drop();
});

const sender = (i: number) => `0x${(0x1000 + i).toString(16).padStart(40, "0")}`;

async function project(tankWei = 10n ** 20n) {
  const p = await seedProject(a);
  const allow = await a.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: GAME, functionSelector: MINT },
  });
  assert.equal(allow.statusCode, 201);
  await creditDeposit(a.db, {
    projectId: p.projectId,
    reference: `t:${randomBytes(8).toString("hex")}`,
    amountWei: tankWei,
  });
  return p;
}

type Seeded = Awaited<ReturnType<typeof project>>;

async function put(p: Seeded, ruleId: string, body: Record<string, unknown>) {
  return a.request({
    method: "PUT",
    url: `/projects/${p.projectId}/policies/${ruleId}`,
    token: p.ownerToken,
    payload: body,
  });
}

async function rule(p: Seeded, ruleId: string, body: Record<string, unknown>) {
  const res = await put(p, ruleId, body);
  assert.equal(res.statusCode, 201, res.body);
}

function authorize(p: Seeded, user: string, via: TestApp = a, extra: Record<string, unknown> = {}) {
  return via.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user,
      target: GAME,
      selector: MINT,
      estimatedGas: GAS,
      chainId: 14601,
      ...extra,
    },
  });
}

/** `n` concurrent authorizations alternating between the two instances; statuses and bodies. */
async function flood(p: Seeded, n: number, userOf: (i: number) => string) {
  const results = await Promise.all(
    Array.from({ length: n }, (_, i) => authorize(p, userOf(i), i % 2 === 0 ? a : b)),
  );
  return results.map((r) => ({ status: r.statusCode, body: r.json() as Record<string, unknown> }));
}

async function reservations(projectId: string) {
  const rows = await a.db.query<{ n: number; balance: string }>(
    `SELECT (SELECT count(*)::int FROM sponsorships WHERE project_id = $1) AS n,
       (SELECT gas_tank_balance::text FROM projects WHERE id = $1) AS balance`,
    [projectId],
  );
  return rows[0]!;
}

async function capEvents(projectId: string) {
  return a.db.query<{ payload: { ruleId: string; sender: string | null } }>(
    "SELECT payload FROM event_outbox WHERE project_id = $1 AND type = 'cap.reached' ORDER BY id",
    [projectId],
  );
}

describe("every cap is exact under 500 concurrent requests across two instances", () => {
  it("first N operations free per player: a lifetime sender count cap of 7 grants 7 of 500, each refusal naming the rule", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "first-seven-free", { kind: "sender_count_cap", maxOperations: 7, window: "lifetime" });
    const results = await flood(p, 500, () => sender(1));
    assert.equal(results.filter((r) => r.status === 200).length, 7);
    const refused = results.filter((r) => r.status !== 200);
    assert.equal(refused.length, 493);
    for (const r of refused) {
      assert.equal(r.status, 403);
      assert.equal(r.body.code, "sender_cap_exceeded");
      assert.equal(r.body.ruleId, "first-seven-free");
    }
    assert.equal((await reservations(p.projectId)).n, 7);
    // Another player still has its own seven; a year later the first still has none.
    assert.equal((await authorize(p, sender(2))).statusCode, 200);
    clock = T0 + 365 * 86_400_000;
    assert.equal((await authorize(p, sender(1), b)).statusCode, 403);
    const events = await capEvents(p.projectId);
    assert.equal(events.length, 1, "cap.reached once per rule, sender and window");
    assert.deepEqual(
      { rule: events[0]!.payload.ruleId, sender: events[0]!.payload.sender },
      { rule: "first-seven-free", sender: sender(1) },
    );
  });

  it("a per-sender count cap of 3 a day over 10 players: exactly 3 each, 30 in all", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "three-a-day", { kind: "sender_count_cap", maxOperations: 3, window: "day" });
    const results = await flood(p, 500, (i) => sender(i % 10));
    assert.equal(results.filter((r) => r.status === 200).length, 30);
    const perSender = await a.db.query<{ sender: string; n: number }>(
      "SELECT sender, count(*)::int AS n FROM sponsorships WHERE project_id = $1 GROUP BY sender",
      [p.projectId],
    );
    assert.equal(perSender.length, 10);
    assert.ok(perSender.every((s) => s.n === 3));
    assert.equal((await capEvents(p.projectId)).length, 10);
  });

  it("a per-sender spend cap of 5 reservations a day grants exactly 5", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "spend", {
      kind: "sender_spend_cap",
      maxWei: (5n * COST + COST / 2n).toString(),
      window: "day",
    });
    const results = await flood(p, 500, () => sender(3));
    assert.equal(results.filter((r) => r.status === 200).length, 5);
    assert.ok(results.every((r) => r.status === 200 || r.body.ruleId === "spend"));
  });

  it("a project-wide count cap of 41 a week over many players grants exactly 41, refused with 402", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "weekly-ops", { kind: "project_count_cap", maxOperations: 41, window: "week" });
    const results = await flood(p, 500, (i) => sender(i));
    assert.equal(results.filter((r) => r.status === 200).length, 41);
    const refused = results.filter((r) => r.status !== 200);
    assert.ok(refused.every((r) => r.status === 402 && r.body.code === "project_cap_exceeded"));
    assert.ok(refused.every((r) => r.body.ruleId === "weekly-ops"));
    assert.equal((await capEvents(p.projectId)).length, 1);
  });

  it("a project-wide spend cap of 23 reservations a month grants exactly 23; the tank matches", async () => {
    clock = T0;
    const tank = 1000n * COST;
    const p = await project(tank);
    await rule(p, "monthly-budget", {
      kind: "project_spend_cap",
      maxWei: (23n * COST).toString(),
      window: "month",
    });
    const results = await flood(p, 500, (i) => sender(i % 50));
    assert.equal(results.filter((r) => r.status === 200).length, 23);
    assert.equal(BigInt((await reservations(p.projectId)).balance), tank - 23n * COST);
  });

  it("the daily cap stays one case: dailyCap grants exactly what it allows, named daily_cap, and dailyCapRemaining agrees", async () => {
    clock = T0;
    const p = await project();
    const patch = await a.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: (13n * COST).toString() },
    });
    assert.equal(patch.statusCode, 200);
    const results = await flood(p, 500, (i) => sender(i));
    assert.equal(results.filter((r) => r.status === 200).length, 13);
    const refused = results.filter((r) => r.status !== 200);
    assert.ok(refused.every((r) => r.body.code === "daily_cap_exceeded" && r.body.ruleId === "daily_cap"));
    const overview = await a.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/overview`,
      token: p.ownerToken,
    });
    assert.equal(overview.json().today.dailyCapRemaining, "0");
    const listed = await a.request({
      method: "GET",
      url: `/projects/${p.projectId}/policies`,
      token: p.ownerToken,
    });
    assert.deepEqual(
      listed
        .json()
        .map((r: { id: string; kind: string; window: string; builtin: boolean }) => [
          r.id,
          r.kind,
          r.window,
          r.builtin,
        ]),
      [["daily_cap", "project_spend_cap", "day", true]],
    );
  });
});

describe("windows reset at their UTC boundaries (injected clock)", () => {
  const cases: { window: string; windowSeconds?: number; last: number; next: number }[] = [
    { window: "day", last: Date.UTC(2030, 0, 1, 23, 59, 59, 999), next: Date.UTC(2030, 0, 2) },
    // 2030-01-06 is a Sunday: the ISO week turns on Monday 00:00 UTC.
    { window: "week", last: Date.UTC(2030, 0, 6, 23, 59, 59), next: Date.UTC(2030, 0, 7) },
    { window: "month", last: Date.UTC(2030, 0, 31, 23, 59, 59), next: Date.UTC(2030, 1, 1) },
    {
      window: "interval",
      windowSeconds: 3600,
      last: Date.UTC(2030, 0, 1, 12, 59, 59),
      next: Date.UTC(2030, 0, 1, 13),
    },
  ];
  for (const c of cases) {
    it(`${c.window}${c.windowSeconds ? ` of ${c.windowSeconds} s` : ""}: used up within the window, free again at its boundary`, async () => {
      clock = T0;
      const p = await project();
      await rule(p, "one", {
        kind: "sender_count_cap",
        maxOperations: 1,
        window: c.window,
        ...(c.windowSeconds ? { windowSeconds: c.windowSeconds } : {}),
      });
      assert.equal((await authorize(p, sender(1))).statusCode, 200);
      clock = c.last;
      const still = await authorize(p, sender(1), b);
      assert.equal(still.statusCode, 403, still.body);
      assert.equal(still.json().ruleId, "one");
      clock = c.next;
      assert.equal((await authorize(p, sender(1), b)).statusCode, 200);
      assert.equal((await authorize(p, sender(1))).statusCode, 403);
    });
  }

  it("a campaign sponsors from startsAt (inclusive) to endsAt (exclusive)", async () => {
    const p = await project();
    await rule(p, "launch", {
      kind: "campaign",
      startsAt: new Date(T0).toISOString(),
      endsAt: new Date(T0 + 3_600_000).toISOString(),
    });
    const at = async (ms: number) => {
      clock = ms;
      const res = await authorize(p, sender(1));
      return res.statusCode === 200 ? "ok" : `${res.json().code}:${res.json().ruleId}`;
    };
    assert.deepEqual(
      [await at(T0 - 1), await at(T0), await at(T0 + 3_599_999), await at(T0 + 3_600_000)],
      ["campaign_not_active:launch", "ok", "ok", "campaign_not_active:launch"],
    );
  });
});

describe("sender lists and the per-operation cost cap", () => {
  it("blocklist, allowlist and cost cap each refuse with their code and rule; the dry run agrees and writes nothing", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "cheaters", { kind: "sender_blocklist", senders: [sender(6)] });
    await rule(p, "beta", { kind: "sender_allowlist", senders: [sender(1), sender(6)] });
    await rule(p, "small-ops", { kind: "operation_cost_cap", maxWei: COST.toString() });
    const check = (user: string, estimatedGas = GAS) =>
      a.request({
        method: "POST",
        url: "/sponsor/check",
        token: p.apiKey,
        payload: { projectId: p.projectId, user, target: GAME, selector: MINT, estimatedGas, chainId: 14601 },
      });
    const cases: [string, number, number, string | undefined, string | undefined][] = [
      [sender(6), GAS, 403, "sender_blocked", "cheaters"],
      [sender(2), GAS, 403, "sender_not_allowed", "beta"],
      [sender(1), GAS + 1, 403, "operation_cost_exceeded", "small-ops"],
      [sender(1), GAS, 200, undefined, undefined],
    ];
    for (const [user, gas, status, code, ruleId] of cases) {
      const dry = await check(user, gas);
      assert.equal(dry.statusCode, 200, dry.body);
      assert.deepEqual(
        [dry.json().wouldSponsor, dry.json().code ?? undefined, dry.json().ruleId ?? undefined],
        [status === 200, code, ruleId],
      );
      const before = await reservations(p.projectId);
      const res = await authorize(p, user, b, { estimatedGas: gas });
      assert.equal(res.statusCode, status, res.body);
      if (code) {
        assert.deepEqual([res.json().code, res.json().ruleId], [code, ruleId]);
        assert.deepEqual(await reservations(p.projectId), before);
      }
    }
  });

  it("the dry run reserves, counts and emits nothing, and answers the cap that would refuse", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "two", { kind: "sender_count_cap", maxOperations: 2, window: "lifetime" });
    const check = () =>
      b.request({
        method: "POST",
        url: "/sponsor/check",
        token: p.apiKey,
        payload: {
          projectId: p.projectId,
          user: sender(1),
          target: GAME,
          selector: MINT,
          estimatedGas: GAS,
          chainId: 14601,
        },
      });
    for (let i = 0; i < 5; i++) assert.equal((await check()).json().wouldSponsor, true);
    assert.equal((await reservations(p.projectId)).n, 0);
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
    const refused = (await check()).json();
    assert.deepEqual(
      [refused.wouldSponsor, refused.code, refused.ruleId],
      [false, "sender_cap_exceeded", "two"],
    );
    const usage = await a.request({
      method: "GET",
      url: `/projects/${p.projectId}/policies/two/usage`,
      token: p.ownerToken,
    });
    assert.equal(usage.statusCode, 200);
    assert.deepEqual(
      usage.json().map((u: { subject: string; operations: number }) => [u.subject, u.operations]),
      [[sender(1), 2]],
    );
    assert.equal((await capEvents(p.projectId)).length, 1);
  });
});

describe("settlement and release give back into the window the reservation was counted in", () => {
  it("a release gives back the spend and the operation; a settlement gives back the unspent part only", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "spend", {
      kind: "sender_spend_cap",
      maxWei: ((5n * COST) / 2n).toString(),
      window: "day",
    });
    await rule(p, "count", { kind: "sender_count_cap", maxOperations: 3, window: "day" });
    const first = (await authorize(p, sender(1))).json();
    const second = (await authorize(p, sender(1))).json();
    const third = await authorize(p, sender(1));
    assert.deepEqual([third.json().code, third.json().ruleId], ["sender_cap_exceeded", "spend"]);

    // The first never landed: its spend and its operation come back.
    assert.equal(await release(a.db, first.authorizationId), true);
    assert.equal((await authorize(p, sender(1))).statusCode, 200);

    // The second landed at a fifth of its reservation: the rest of the spend comes back, but the
    // operation stays counted.
    await a.db.transaction((tx) =>
      billOperation(tx, {
        authId: second.authorizationId,
        chainId: 14601,
        paymaster: PAYMASTER,
        outcome: "success",
        actualGasUsed: 30_000n,
        actualGasCostWei: COST / 5n,
        txHash: `0x${"11".repeat(32)}`,
        userOpHash: `0x${"22".repeat(32)}`,
      }),
    );
    const usage = await a.db.query<{ rule_id: string; spent: string; ops: number }>(
      "SELECT rule_id, spent::text AS spent, ops::int AS ops FROM policy_usage WHERE project_id = $1 ORDER BY rule_id",
      [p.projectId],
    );
    assert.deepEqual(
      usage.map((u) => [u.rule_id, BigInt(u.spent), u.ops]),
      [
        ["count", COST / 5n + COST, 2],
        ["spend", COST / 5n + COST, 2],
      ],
    );
    // 2.2 of 2.5 reservations' worth, and the third operation of three.
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
    const last = await authorize(p, sender(1));
    assert.deepEqual([last.json().code, last.json().ruleId], ["sender_cap_exceeded", "count"]);

    // The next day is a new window, whatever happens to yesterday's reservations.
    clock = Date.UTC(2030, 0, 2, 1);
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
  });
});

describe("ERC-7677: refusals name the rule in the JSON-RPC error data", () => {
  const account = parseAbi(["function execute(address dest, uint256 value, bytes func)"]);
  const game = parseAbi(["function mint(uint256 itemId)"]);
  const userOp = (user: string, nonce: number) => ({
    sender: user,
    nonce: numberToHex(nonce),
    callData: encodeFunctionData({
      abi: account,
      functionName: "execute",
      args: [GAME, 0n, encodeFunctionData({ abi: game, functionName: "mint", args: [7n] })],
    }),
    callGasLimit: numberToHex(80_000),
    verificationGasLimit: numberToHex(60_000),
    preVerificationGas: numberToHex(50_000),
    maxFeePerGas: numberToHex(2_000_000_000),
    maxPriorityFeePerGas: numberToHex(1_000_000_000),
    signature: "0x",
  });
  async function rpc(p: Seeded, method: string, op: unknown) {
    const res = await a.app.inject({
      method: "POST",
      url: "/rpc",
      headers: { "content-type": "application/json", authorization: `Bearer ${p.apiKey}` },
      payload: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method,
        params: [op, "0x0000000071727de22e5e9d8baf0edac6f37da032", "0x3909", {}],
      }),
    });
    return res.json();
  }

  it("pm_getPaymasterData counts against the caps; the stub refuses early on the blocklist and used-up caps", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "one-free", { kind: "sender_count_cap", maxOperations: 1, window: "lifetime" });
    await rule(p, "banned", { kind: "sender_blocklist", senders: [sender(9)] });
    assert.ok((await rpc(p, "pm_getPaymasterStubData", userOp(sender(1), 0))).result);
    assert.ok((await rpc(p, "pm_getPaymasterData", userOp(sender(1), 0))).result);
    const second = await rpc(p, "pm_getPaymasterData", userOp(sender(1), 1));
    assert.equal(second.error.code, -32000);
    assert.deepEqual(second.error.data, { code: "sender_cap_exceeded", ruleId: "one-free" });
    const stub = await rpc(p, "pm_getPaymasterStubData", userOp(sender(1), 1));
    assert.deepEqual(stub.error.data, { code: "sender_cap_exceeded", ruleId: "one-free" });
    const blocked = await rpc(p, "pm_getPaymasterStubData", userOp(sender(9), 0));
    assert.deepEqual(blocked.error.data, { code: "sender_blocked", ruleId: "banned" });
    assert.equal((await reservations(p.projectId)).n, 1);
  });
});

describe("managing rules", () => {
  it("malformed rules get 400 with a stable code and change nothing", async () => {
    const p = await project();
    await rule(p, "keep", { kind: "sender_count_cap", maxOperations: 5, window: "day" });
    const listed = async () =>
      (await a.request({ method: "GET", url: `/projects/${p.projectId}/policies`, token: p.ownerToken }))
        .body;
    const before = await listed();
    const bad: [string, Record<string, unknown>, string][] = [
      ["neg", { kind: "sender_spend_cap", maxWei: "-1", window: "day" }, "invalid_request"],
      ["float", { kind: "sender_spend_cap", maxWei: "1.5", window: "day" }, "invalid_request"],
      ["number", { kind: "sender_spend_cap", maxWei: 1000, window: "day" }, "invalid_request"],
      ["zero", { kind: "sender_spend_cap", maxWei: "0", window: "day" }, "invalid_policy"],
      [
        "unknown",
        { kind: "sender_count_cap", maxOperations: 1, window: "day", colour: "red" },
        "invalid_request",
      ],
      ["stray", { kind: "sender_count_cap", maxOperations: 1, window: "day", maxWei: "5" }, "invalid_policy"],
      ["nokind", { kind: "per_planet_cap", maxOperations: 1, window: "day" }, "invalid_request"],
      ["nowindow", { kind: "sender_count_cap", maxOperations: 1 }, "invalid_policy"],
      ["badwindow", { kind: "sender_count_cap", maxOperations: 1, window: "fortnight" }, "invalid_request"],
      ["noseconds", { kind: "sender_count_cap", maxOperations: 1, window: "interval" }, "invalid_policy"],
      [
        "shortwindow",
        { kind: "sender_count_cap", maxOperations: 1, window: "interval", windowSeconds: 5 },
        "invalid_request",
      ],
      [
        "secondsday",
        { kind: "sender_count_cap", maxOperations: 1, window: "day", windowSeconds: 3600 },
        "invalid_policy",
      ],
      ["dup", { kind: "sender_count_cap", maxOperations: 9, window: "day" }, "invalid_policy"],
      ["zeroops", { kind: "project_count_cap", maxOperations: 0, window: "day" }, "invalid_request"],
      [
        "backwards",
        { kind: "campaign", startsAt: "2030-02-01T00:00:00Z", endsAt: "2030-01-01T00:00:00Z" },
        "invalid_policy",
      ],
      ["empty", { kind: "campaign" }, "invalid_policy"],
      ["baddate", { kind: "campaign", startsAt: "next tuesday" }, "invalid_request"],
      ["nolist", { kind: "sender_blocklist", senders: [] }, "invalid_request"],
      ["badaddr", { kind: "sender_blocklist", senders: ["0x1234"] }, "invalid_request"],
      [
        "twice",
        { kind: "sender_blocklist", senders: [sender(1), sender(1).toUpperCase().replace("0X", "0x")] },
        "invalid_policy",
      ],
      [
        "checksum",
        { kind: "sender_blocklist", senders: ["0x5FbDB2315678afecb367f032d93F642f64180aA3"] },
        "invalid_policy",
      ],
      [
        "toolong",
        { kind: "sender_allowlist", senders: Array.from({ length: 1001 }, (_, i) => sender(i)) },
        "invalid_request",
      ],
      ["daily_cap", { kind: "project_spend_cap", maxWei: "5", window: "day" }, "invalid_policy"],
      ["Bad Id", { kind: "campaign", endsAt: "2031-01-01T00:00:00Z" }, "invalid_request"],
    ];
    for (const [id, body, code] of bad) {
      const res = await put(p, encodeURIComponent(id), body);
      assert.equal(res.statusCode, 400, `${id}: ${res.statusCode} ${res.body}`);
      assert.equal(res.headers["content-type"], "application/problem+json; charset=utf-8");
      assert.equal(res.json().code, code, `${id}: ${res.body}`);
    }
    // Replacing a rule in place with a malformed one changes nothing either.
    const replace = await put(p, "keep", {
      kind: "sender_count_cap",
      maxOperations: 5,
      window: "day",
      senders: [],
    });
    assert.equal(replace.statusCode, 400);
    assert.equal(await listed(), before);
  });

  it("bounds the number of rules; replaces in place (200) keeping usage; deletes; roles as the allowlist's", async () => {
    clock = T0;
    const p = await project();
    await rule(p, "cap", { kind: "sender_count_cap", maxOperations: 1, window: "day" });
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
    const raised = await put(p, "cap", { kind: "sender_count_cap", maxOperations: 2, window: "day" });
    assert.equal(raised.statusCode, 200);
    assert.equal(
      (await authorize(p, sender(1))).statusCode,
      200,
      "the raise counts what the day already used",
    );
    assert.equal((await authorize(p, sender(1))).statusCode, 403);
    for (let i = 1; i < 32; i++)
      await rule(p, `ops-${i}`, {
        kind: "project_count_cap",
        maxOperations: 1000,
        window: "interval",
        windowSeconds: 60 * i,
      });
    const full = await put(p, "one-too-many", { kind: "campaign", endsAt: "2031-01-01T00:00:00Z" });
    assert.deepEqual([full.statusCode, full.json().code], [400, "invalid_policy"]);
    const del = await a.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/policies/cap`,
      token: p.ownerToken,
    });
    assert.equal(del.statusCode, 200);
    assert.equal(del.json().id, "cap");
    const again = await a.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/policies/cap`,
      token: p.ownerToken,
    });
    assert.equal(again.statusCode, 404);
    assert.equal((await authorize(p, sender(1))).statusCode, 200);
    // The sponsoring key may not change rules; another tenant does not see the project.
    const byKey = await a.request({
      method: "PUT",
      url: `/projects/${p.projectId}/policies/x`,
      token: p.apiKey,
      payload: { kind: "campaign", endsAt: "2031-01-01T00:00:00Z" },
    });
    assert.equal(byKey.statusCode, 403);
    const stranger = await a.request({
      method: "GET",
      url: `/projects/${p.projectId}/policies`,
      token: await a.token("stranger@example.com"),
    });
    assert.equal(stranger.statusCode, 404);
  });
});

describe("per-sender analytics", () => {
  it("ranks senders by settled operations or by cost, bounded by limit", async () => {
    clock = T0;
    const p = await project();
    const settle = async (user: string, costWei: bigint) => {
      const auth = (await authorize(p, user)).json();
      await a.db.transaction((tx) =>
        billOperation(tx, {
          authId: auth.authorizationId,
          chainId: 14601,
          paymaster: PAYMASTER,
          outcome: "success",
          actualGasUsed: 21_000n,
          actualGasCostWei: costWei,
          txHash: `0x${randomBytes(32).toString("hex")}`,
          userOpHash: `0x${randomBytes(32).toString("hex")}`,
        }),
      );
    };
    await settle(sender(1), 10n);
    await settle(sender(1), 10n);
    await settle(sender(1), 10n);
    await settle(sender(2), 1000n);
    // Pending authorizations show beside the settled figures; a sender with nothing settled yet
    // is not among the top senders.
    await authorize(p, sender(1));
    await authorize(p, sender(3));
    const get = async (query: string) =>
      (
        await a.request({
          method: "GET",
          url: `/projects/${p.projectId}/analytics/senders${query}`,
          token: p.ownerToken,
        })
      ).json().senders;
    const byOps = await get("");
    assert.deepEqual(
      byOps.map((s: { sender: string; operations: number; costWei: string; pending: number }) => [
        s.sender,
        s.operations,
        s.costWei,
        s.pending,
      ]),
      [
        [sender(1), 3, "30", 1],
        [sender(2), 1, "1000", 0],
      ],
    );
    assert.deepEqual(
      (await get("?by=cost&limit=1")).map((s: { sender: string }) => s.sender),
      [sender(2)],
    );
    const tooMany = await a.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/senders?limit=1000`,
      token: p.ownerToken,
    });
    assert.equal(tooMany.statusCode, 400);
  });
});
