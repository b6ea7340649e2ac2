import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { writeCheckpoints } from "../src/ledger/checkpoints.ts";
import { creditDeposit, parity, release, TANKS_ON_CHAIN_SQL } from "../src/ledger/ledger.ts";
import { orphanOperations, recordOperation } from "../src/settlement/store.ts";
import { relaySponsoredEvents } from "../src/webhooks/relay.ts";
import {
  allowMintOnEveryChain,
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  OTHER_CHAIN,
  OTHER_PAYMASTER,
  paidOperation,
  startTestApp,
  type TestApp,
  twoChainsEnv,
} from "./support/app.ts";

/**
 * One gas tank per (project, chain) (issue 23, migration 035): a deposit on one chain never pays
 * for another, and every movement after the reservation (settlement, release, reversal of a
 * reorganised operation) and the daily cap stay on the reservation's chain. Parity and the
 * checkpoints hold per chain. The home chain (14601) answers every response as before.
 */
const HOME = 14601;
const OTHER = OTHER_CHAIN;

let t: TestApp;
before(async () => {
  t = await startTestApp({ env: twoChainsEnv() });
});
after(() => t.close());

/** A project funded on its home chain whose allowlist entry is for every chain. */
async function fundedEverywhere(tankWei: bigint) {
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, tankWei);
  await allowMintOnEveryChain(t, p);
  return p;
}

/** fundedEverywhere, with `otherWei` credited to its tank on the other chain. */
async function fundedOnBoth(homeWei: bigint, otherWei: bigint) {
  const p = await fundedEverywhere(homeWei);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    chainId: OTHER,
    reference: `other:${p.projectId}`,
    amountWei: otherWei,
  });
  return p;
}

/** A webhook endpoint of the project subscribed to balance.low (so the event is written). */
async function subscribeLowBalance(p: { projectId: string; ownerToken: string }) {
  const hook = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/webhooks`,
    token: p.ownerToken,
    payload: { url: "https://hooks.example.com/low", eventTypes: ["balance.low"] },
  });
  assert.equal(hook.statusCode, 201, hook.body);
}

const authorize = (p: { projectId: string; apiKey: string }, chainId: number) =>
  authorizeMint(t, p, undefined, chainId);

async function granted(p: { projectId: string; apiKey: string }, chainId: number) {
  const res = await authorize(p, chainId);
  assert.equal(res.statusCode, 200, res.body);
  const authId = (res.json() as { authorizationId: string }).authorizationId;
  const [row] = await t.db.query<{ max: string }>(
    "SELECT max_gas_cost::text AS max FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
    [authId],
  );
  return { authId, maxWei: BigInt(row!.max) };
}

/** The project's tanks, by chain (the home chain's is the project's row). */
async function tanks(projectId: string): Promise<Record<number, bigint>> {
  const rows = await t.db.query<{ chain_id: number; balance: string }>(
    `SELECT home_chain_id AS chain_id, gas_tank_balance::text AS balance FROM projects WHERE id = $1
     UNION ALL SELECT chain_id, balance::text FROM gas_tanks WHERE project_id = $1`,
    [projectId],
  );
  return Object.fromEntries(rows.map((r) => [r.chain_id, BigInt(r.balance)]));
}

const paid = (authId: string, costWei: bigint) => paidOperation(authId, { blockNumber: 77n, costWei });

describe("an allowlist per chain", () => {
  it("an entry allows its chain alone, unless made for every chain; the home chain when none is named", async () => {
    // fundedProject's entry names no chain: the home chain's.
    const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 18n);
    await creditDeposit(t.db, {
      projectId: p.projectId,
      chainId: OTHER,
      reference: `a:${p.projectId}`,
      amountWei: 10n ** 18n,
    });
    const list = async () =>
      (
        await t.request({ method: "GET", url: `/projects/${p.projectId}/allowlist`, token: p.ownerToken })
      ).json() as { chain_id: number | null; enabled: boolean }[];
    assert.deepEqual(
      (await list()).map((e) => [e.chain_id, e.enabled]),
      [[HOME, true]],
    );
    assert.equal((await authorize(p, HOME)).statusCode, 200);
    const refused = await authorize(p, OTHER);
    assert.equal(refused.statusCode, 403, refused.body);
    assert.equal(refused.json().code, "not_allowlisted");

    const entry = (chainId: number | null | undefined) => ({
      targetContract: MINT_TARGET,
      functionSelector: MINT_SELECTOR,
      ...(chainId === undefined ? {} : { chainId }),
    });
    const post = (chainId: number | null | undefined) =>
      t.request({
        method: "POST",
        url: `/projects/${p.projectId}/allowlist`,
        token: p.ownerToken,
        payload: entry(chainId),
      });
    const del = (chainId: number | null | undefined) =>
      t.request({
        method: "DELETE",
        url: `/projects/${p.projectId}/allowlist`,
        token: p.ownerToken,
        payload: entry(chainId),
      });

    assert.equal((await post(OTHER)).statusCode, 201);
    assert.equal((await authorize(p, OTHER)).statusCode, 200);
    // Disabling the home chain's entry (no chain named) leaves the other chain's.
    assert.equal((await del(undefined)).statusCode, 200);
    assert.equal((await authorize(p, HOME)).json().code, "not_allowlisted");
    assert.equal((await authorize(p, OTHER)).statusCode, 200);
    // An entry for every chain allows both; disabling it, and the other chain's, allows neither.
    assert.equal((await post(null)).statusCode, 201);
    assert.equal((await authorize(p, HOME)).statusCode, 200);
    assert.equal((await del(null)).statusCode, 200);
    assert.equal((await del(OTHER)).statusCode, 200);
    assert.equal((await authorize(p, OTHER)).json().code, "not_allowlisted");
    assert.deepEqual(
      (await list()).map((e) => [e.chain_id, e.enabled]),
      [
        [null, false],
        [HOME, false],
        [OTHER, false],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    // A chain not served here is refused, and changes nothing.
    const unknown = await post(5);
    assert.equal(unknown.statusCode, 400, unknown.body);
    assert.equal((await list()).length, 3);
  });
});

describe("policies per chain", () => {
  it("a rule for one chain leaves the others alone; a rule for every chain counts each chain apart", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 18n);
    const put = (ruleId: string, body: Record<string, unknown>) =>
      t.request({
        method: "PUT",
        url: `/projects/${p.projectId}/policies/${ruleId}`,
        token: p.ownerToken,
        payload: body,
      });
    const other = await put("other-once", {
      kind: "project_count_cap",
      maxOperations: 1,
      window: "day",
      chainId: OTHER,
    });
    assert.equal(other.statusCode, 201, other.body);
    assert.equal(other.json().chain_id, OTHER);
    const player = `0x${"c4".repeat(20)}`;
    const as = (chainId: number) =>
      t.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: {
          projectId: p.projectId,
          user: player,
          target: MINT_TARGET,
          selector: MINT_SELECTOR,
          estimatedGas: 100_000,
          chainId,
        },
      });
    assert.equal((await as(OTHER)).statusCode, 200);
    assert.equal((await as(OTHER)).json().code, "project_cap_exceeded");
    assert.equal((await as(HOME)).statusCode, 200);
    assert.equal((await as(HOME)).statusCode, 200);

    // For every chain (no chainId): one operation per player and day on each chain.
    const every = await put("once-a-day", { kind: "sender_count_cap", maxOperations: 1, window: "day" });
    assert.equal(every.statusCode, 201, every.body);
    assert.equal(every.json().chain_id, null);
    assert.equal((await as(HOME)).statusCode, 200);
    assert.equal((await as(HOME)).json().code, "sender_cap_exceeded");
    const paused = await put("other-once", {
      kind: "project_count_cap",
      maxOperations: 1,
      window: "day",
      chainId: OTHER,
      paused: true,
    });
    assert.equal(paused.statusCode, 200, paused.body);
    assert.equal((await as(OTHER)).statusCode, 200, "the other chain's count of this player is its own");
    const usage = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/policies/once-a-day/usage`,
      token: p.ownerToken,
    });
    assert.equal(usage.statusCode, 200, usage.body);
    assert.deepEqual(
      (usage.json() as { chain_id: number; operations: number }[])
        .map((u) => [u.chain_id, u.operations])
        .sort(),
      [
        [HOME, 1],
        [OTHER, 1],
      ],
    );
    // A chain not served here is refused.
    const unknown = await put("nowhere", {
      kind: "project_count_cap",
      maxOperations: 1,
      window: "day",
      chainId: 5,
    });
    assert.equal(unknown.statusCode, 400, unknown.body);
  });
});

describe("a gas tank per chain", () => {
  it("a deposit on one chain never pays for another: a full home tank leaves the other chain at 402", async () => {
    const p = await fundedEverywhere(10n ** 18n);
    const refused = await authorize(p, OTHER);
    assert.equal(refused.statusCode, 402, refused.body);
    assert.equal(refused.json().code, "insufficient_balance");
    assert.deepEqual(await tanks(p.projectId), { [HOME]: 10n ** 18n });
    // The home chain pays for itself as before.
    await granted(p, HOME);

    // Every event names the chain it happened on (an endpoint subscribed to all of them).
    const hook = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/webhooks`,
      token: p.ownerToken,
      payload: { url: "https://hooks.example.com/chains", eventTypes: ["*"] },
    });
    assert.equal(hook.statusCode, 201, hook.body);

    // Funded on the other chain, the other chain pays, from its own tank alone.
    await creditDeposit(t.db, {
      projectId: p.projectId,
      chainId: OTHER,
      reference: `b:${p.projectId}`,
      amountWei: 10n ** 16n,
    });
    const before = await tanks(p.projectId);
    const b = await granted(p, OTHER);
    const after = await tanks(p.projectId);
    assert.equal(after[HOME], before[HOME]);
    assert.equal(after[OTHER], before[OTHER]! - b.maxWei);
    // The sponsorship's event is written by the relay after its reservation (migration 055).
    await relaySponsoredEvents(t.db);
    const events = await t.db.query<{ type: string; chain: number }>(
      `SELECT type, (payload ->> 'chainId')::int AS chain FROM event_outbox WHERE project_id = $1 ORDER BY id`,
      [p.projectId],
    );
    assert.deepEqual(
      events.map((e) => [e.type, e.chain]),
      [
        ["deposit.credited", OTHER],
        ["sponsorship.sponsored", OTHER],
      ],
    );

    // The events name their chain, and filter by it.
    const byChain = async (chainId: number) => {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/events?chainId=${chainId}`,
        token: p.ownerToken,
      });
      assert.equal(res.statusCode, 200, res.body);
      return (res.json().events as { chain_id: number }[]).map((e) => e.chain_id);
    };
    assert.deepEqual(await byChain(OTHER), [OTHER]);
    assert.deepEqual(await byChain(HOME), [HOME]);

    // The balance view and the project answer for the home chain, in its currency.
    const balance = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/balance`,
      token: p.ownerToken,
    });
    assert.equal(balance.json().balance, after[HOME]!.toString());
    assert.equal(balance.json().currency, "S");
    // Each tank in its own currency, the home chain first; `?chainId=` answers for another tank.
    assert.deepEqual(
      balance
        .json()
        .chains.map((c: { chainId: number; balance: string; currency: string }) => [
          c.chainId,
          c.balance,
          c.currency,
        ]),
      [
        [HOME, after[HOME]!.toString(), "S"],
        [OTHER, after[OTHER]!.toString(), "LOC"],
      ],
    );
    const other = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/balance?chainId=${OTHER}`,
      token: p.ownerToken,
    });
    assert.equal(other.statusCode, 200, other.body);
    assert.deepEqual(
      [other.json().chainId, other.json().balance, other.json().currency],
      [OTHER, after[OTHER]!.toString(), "LOC"],
    );
    const unknown = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/balance?chainId=5`,
      token: p.ownerToken,
    });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().code, "not_found");
  });

  it("a tank of exactly K reservations on one chain grants K there, whatever the other chain holds", async () => {
    const p = await fundedOnBoth(10n ** 18n, 1n);
    const probe = await authorize(p, OTHER);
    assert.equal(probe.statusCode, 402);
    // One reservation's worth, learnt from the home chain (the same fees and gas).
    const { maxWei } = await granted(p, HOME);
    const K = 3n;
    await creditDeposit(t.db, {
      projectId: p.projectId,
      chainId: OTHER,
      reference: `k2:${p.projectId}`,
      amountWei: K * maxWei - 1n,
    });
    const answers = await Promise.all(Array.from({ length: 12 }, () => authorize(p, OTHER)));
    const codes = answers.map((r) => r.statusCode);
    assert.equal(codes.filter((c) => c === 200).length, Number(K), codes.join(","));
    assert.equal(codes.filter((c) => c === 402).length, 12 - Number(K));
    assert.equal((await tanks(p.projectId))[OTHER], 0n);
  });

  it("settles, releases and reverses on the reservation's chain, and parity holds per chain", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 16n);
    const start = await tanks(p.projectId);

    // Settled: the other chain's tank keeps the cost, gets the rest back; the home tank is untouched.
    const settled = await granted(p, OTHER);
    const op = paid(settled.authId, 1_000_000n);
    const recorded = await t.db.transaction((tx) => recordOperation(tx, OTHER, OTHER_PAYMASTER, op));
    assert.equal(recorded.billing?.kind, "charged");
    assert.deepEqual(await tanks(p.projectId), { [HOME]: start[HOME]!, [OTHER]: start[OTHER]! - 1_000_000n });

    // The paymaster of one chain cannot settle an authorization of the other.
    const home = await granted(p, HOME);
    const crossed = await t.db.transaction((tx) =>
      recordOperation(tx, OTHER, OTHER_PAYMASTER, paid(home.authId, 5n)),
    );
    assert.deepEqual(crossed.billing, {
      kind: "unbilled",
      projectId: p.projectId,
      reason: "authorization_of_another_paymaster",
    });

    // Released: the whole reservation goes back to the chain it was taken from.
    const released = await granted(p, OTHER);
    assert.equal(await release(t.db, released.authId), true);
    const [entry] = await t.db.query<{ chain_id: number }>(
      "SELECT chain_id FROM ledger_entries WHERE kind = 'release' AND reference = $1",
      [released.authId],
    );
    assert.equal(entry!.chain_id, OTHER);

    // A reorganisation on the other chain gives the charge back to the other chain's tank.
    assert.equal(await orphanOperations(t.db, OTHER, [op.blockHash]), 1);
    const afterReorg = await tanks(p.projectId);
    assert.equal(afterReorg[OTHER], start[OTHER]!);
    assert.equal(afterReorg[HOME], start[HOME]! - home.maxWei);

    // Parity per chain, from the checkpoints and from scratch; the top level is the home chain's.
    for (const fromScratch of [false, true]) {
      const [report] = await parity(t.db, [p.projectId], { fromScratch });
      assert.deepEqual(
        report!.chains.map((c) => [c.chainId, c.cachedBalance, c.inSync]),
        [
          [HOME, afterReorg[HOME]!.toString(), true],
          [OTHER, afterReorg[OTHER]!.toString(), true],
        ],
      );
      assert.equal(report!.cachedBalance, afterReorg[HOME]!.toString());
      assert.equal(report!.inSync, true);
    }
    assert.deepEqual(await writeCheckpoints(t.db, [p.projectId]), [p.projectId]);
    const checkpoints = await t.db.query<{ chain_id: number; balance: string }>(
      "SELECT chain_id, balance::text FROM ledger_checkpoints WHERE project_id = $1 ORDER BY chain_id",
      [p.projectId],
    );
    assert.deepEqual(
      checkpoints.map((c) => [c.chain_id, c.balance]),
      [
        [HOME, afterReorg[HOME]!.toString()],
        [OTHER, afterReorg[OTHER]!.toString()],
      ],
    );
    // A drift on the other chain shows there, and in the report over projects.
    await t.db.query("UPDATE gas_tanks SET balance = balance + 7 WHERE project_id = $1 AND chain_id = $2", [
      p.projectId,
      OTHER,
    ]);
    const res = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity`,
      token: p.ownerToken,
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as {
      inSync: boolean;
      chains: { chainId: number; delta: string; inSync: boolean }[];
    };
    assert.equal(body.inSync, true, "the home chain's tank agrees");
    assert.deepEqual(
      body.chains.map((c) => [c.chainId, c.delta, c.inSync]),
      [
        [HOME, "0", true],
        [OTHER, "7", false],
      ],
    );
    const otherParity = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity?chainId=${OTHER}`,
      token: p.ownerToken,
    });
    assert.deepEqual(
      [otherParity.json().delta, otherParity.json().inSync, otherParity.json().cachedBalance],
      ["7", false, (afterReorg[OTHER]! + 7n).toString()],
    );
    const report = await t.request({
      method: "GET",
      url: "/projects/funds/parity-report?onlyDrift=true",
      token: p.ownerToken,
    });
    assert.deepEqual(
      (report.json() as { projects: { projectId: string }[] }).projects.map((r) => r.projectId),
      [p.projectId],
    );
    await t.db.query("UPDATE gas_tanks SET balance = balance - 7 WHERE project_id = $1 AND chain_id = $2", [
      p.projectId,
      OTHER,
    ]);
  });

  it("announces balance.low for the tank that crossed the threshold, naming its chain", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 15n);
    await subscribeLowBalance(p);
    const alert = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/balance-alert`,
      token: p.ownerToken,
      payload: { thresholdWei: (10n ** 15n - 1n).toString() },
    });
    assert.equal(alert.statusCode, 200, alert.body);
    // A reservation on the other chain takes its tank below the threshold; the home tank stays far above.
    await granted(p, OTHER);
    await granted(p, HOME);
    const events = await t.db.query<{ chain: number; balance: string }>(
      `SELECT (payload ->> 'chainId')::int AS chain, payload ->> 'balance' AS balance FROM event_outbox
       WHERE project_id = $1 AND type = 'balance.low'`,
      [p.projectId],
    );
    assert.deepEqual(
      events.map((e) => [e.chain, e.balance]),
      [[OTHER, (await tanks(p.projectId))[OTHER]!.toString()]],
    );
  });

  it("counts the daily cap per chain, and sums each chain's tanks apart for its paymaster", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 18n);
    const first = await granted(p, HOME);
    const patch = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: (first.maxWei + first.maxWei / 2n).toString() },
    });
    assert.equal(patch.statusCode, 200, patch.body);
    // The home chain has used most of its day; the other chain has used none of its own.
    assert.equal((await authorize(p, HOME)).json().code, "daily_cap_exceeded");
    await granted(p, OTHER);
    assert.equal((await authorize(p, OTHER)).json().code, "daily_cap_exceeded");

    const sum = async (chainId: number) =>
      BigInt((await t.db.query<{ n: string }>(`SELECT (${TANKS_ON_CHAIN_SQL})::text AS n`, [chainId]))[0]!.n);
    const all = await t.db.query<{ home: string; other: string }>(
      `SELECT (SELECT sum(gas_tank_balance) FROM projects)::text AS home,
         (SELECT sum(balance) FROM gas_tanks WHERE chain_id = $1)::text AS other`,
      [OTHER],
    );
    assert.equal(await sum(HOME), BigInt(all[0]!.home));
    assert.equal(await sum(OTHER), BigInt(all[0]!.other));
  });
});

describe("analytics per chain", () => {
  it("answer the home chain by default and one chain with ?chainId=, in that chain's currency", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 17n);
    // Two operations settle on the other chain, one on the home chain; one more stays pending on the other.
    for (const [chainId, cost] of [
      [OTHER, 3_000n],
      [OTHER, 4_000n],
      [HOME, 5_000n],
    ] as const) {
      const g = await granted(p, chainId);
      const paymaster = chainId === HOME ? await paymasterOf(g.authId) : OTHER_PAYMASTER;
      const recorded = await t.db.transaction((tx) =>
        recordOperation(tx, chainId, paymaster, paid(g.authId, cost)),
      );
      assert.equal(recorded.billing?.kind, "charged");
    }
    const pending = await granted(p, OTHER);
    const get = async (path: string) => {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/${path}`,
        token: p.ownerToken,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };

    const home = await get("overview");
    assert.equal(home.chainId, HOME);
    assert.equal(home.totalSponsored, 1);
    assert.equal(home.totalGasSaved, "5000");
    const other = await get(`overview?chainId=${OTHER}`);
    assert.equal(other.chainId, OTHER);
    assert.equal(other.totalSponsored, 2);
    assert.equal(other.totalGasSaved, "7000");
    assert.equal(other.today.sponsored, 2);
    assert.deepEqual(other.topContracts, [
      { address: MINT_TARGET, calls: 2, gasUsed: other.topContracts[0].gasUsed },
    ]);
    assert.deepEqual(home.chains, [
      { chainId: HOME, currency: "S", totalSponsored: 1, totalGasSaved: "5000" },
      { chainId: OTHER, currency: "LOC", totalSponsored: 2, totalGasSaved: "7000" },
    ]);
    assert.deepEqual(other.chains, home.chains);

    const money = await get(`money?chainId=${OTHER}`);
    assert.equal(money.chainId, OTHER);
    assert.equal(money.spentTotal, "7000");
    assert.equal(money.reserved, pending.maxWei.toString());
    assert.equal(money.available, (await tanks(p.projectId))[OTHER]!.toString());
    const homeMoney = await get("money");
    assert.equal(homeMoney.spentTotal, "5000");
    assert.equal(homeMoney.reserved, "0");

    const days = await get(`daily?chainId=${OTHER}`);
    assert.equal(days.chainId, OTHER);
    const today = days.days.at(-1);
    assert.deepEqual([today.authorized, today.sponsored, today.costWei], [3, 2, "7000"]);
    assert.deepEqual((await get("daily")).days.at(-1).costWei, "5000");
    // Each authorization here is a different player: one row per sender, on its chain alone.
    const senders = await get(`senders?chainId=${OTHER}&by=cost`);
    assert.equal(senders.chainId, OTHER);
    const figures = (r: { senders: { operations: number; costWei: string }[] }) =>
      r.senders.map((s) => [s.operations, s.costWei]);
    assert.deepEqual(figures(senders), [
      [1, "4000"],
      [1, "3000"],
    ]);
    assert.deepEqual(figures(await get("senders")), [[1, "5000"]]);

    // Events: every chain's by default; one chain's total from its own rollup.
    assert.equal((await get("events")).total, 4);
    assert.equal((await get(`events?chainId=${OTHER}`)).total, 3);
    assert.equal((await get(`events?chainId=${OTHER}&status=success`)).total, 2);

    // A chain the service does not serve has no figures.
    for (const view of ["overview", "money", "daily", "senders"]) {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/${view}?chainId=999`,
        token: p.ownerToken,
      });
      assert.equal(res.statusCode, 404, `${view}: ${res.body}`);
      assert.equal(res.json().code, "not_found");
    }
  });
});

/** The paymaster an authorization was signed for. */
async function paymasterOf(authId: string): Promise<string> {
  const [row] = await t.db.query<{ paymaster: string }>(
    "SELECT paymaster FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
    [authId],
  );
  return row!.paymaster;
}

describe("a project's home chain", () => {
  it("is chosen at creation: its tank is the project's balance, its funding account the deposit address", async () => {
    const owner = await t.token("home-chain@example.com");
    const slug = `home-${Date.now().toString(36)}`;
    assert.equal(
      (await t.request({ method: "POST", url: "/orgs", token: owner, payload: { name: slug, slug } }))
        .statusCode,
      201,
    );
    const create = (id: string, homeChainId?: number) =>
      t.request({
        method: "POST",
        url: "/projects",
        token: owner,
        payload: { id, name: "Homed", owner: slug, ...(homeChainId === undefined ? {} : { homeChainId }) },
      });
    const refused = await create(`${slug}-x`, 999);
    assert.equal(refused.statusCode, 400, refused.body);
    assert.equal(refused.json().code, "invalid_request");
    assert.equal((await t.db.query("SELECT 1 FROM projects WHERE id = $1", [`${slug}-x`])).length, 0);

    const made = await create(`${slug}-o`, OTHER);
    assert.equal(made.statusCode, 201, made.body);
    const project = made.json();
    assert.equal(project.home_chain_id, OTHER);
    const account = await t.request({
      method: "GET",
      url: `/projects/${project.id}/funding-accounts/${OTHER}`,
      token: owner,
    });
    assert.equal(account.statusCode, 200, account.body);
    assert.equal(account.json().address, project.deposit_address);

    await creditDeposit(t.db, {
      projectId: project.id,
      chainId: OTHER,
      reference: `h:${project.id}`,
      amountWei: 77n,
    });
    const balance = await t.request({ method: "GET", url: `/projects/${project.id}/balance`, token: owner });
    assert.equal(balance.statusCode, 200, balance.body);
    assert.deepEqual(
      [balance.json().chainId, balance.json().balance, balance.json().currency],
      [OTHER, "77", "LOC"],
    );
    const read = (await t.request({ method: "GET", url: `/projects/${project.id}`, token: owner })).json();
    assert.equal(read.gas_tank_balance, "77");
    // The project's answer lists every tank, the home chain's first, as the balance does.
    assert.deepEqual(read.chains, balance.json().chains);
    assert.deepEqual(
      read.chains.map((c: { chainId: number; balance: string; currency: string }) => [
        c.chainId,
        c.balance,
        c.currency,
      ]),
      [
        [OTHER, "77", "LOC"],
        [HOME, "0", "S"],
      ],
    );
    const overview = await t.request({
      method: "GET",
      url: `/projects/${project.id}/analytics/overview`,
      token: owner,
    });
    assert.equal(overview.json().chainId, OTHER);
    assert.deepEqual(
      overview.json().chains.map((c: { chainId: number }) => c.chainId),
      [OTHER, HOME],
    );
  });
});

describe("a low-balance threshold per chain", () => {
  it("a chain's own threshold overrides the project's, null silences one chain, and crossings name the chain", async () => {
    const p = await fundedOnBoth(10n ** 18n, 10n ** 16n);
    await subscribeLowBalance(p);
    const put = async (payload: { thresholdWei: string | null; chainId?: number }) => {
      const res = await t.request({
        method: "PUT",
        url: `/projects/${p.projectId}/balance-alert`,
        token: p.ownerToken,
        payload,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };
    const alerts = async () =>
      (
        await t.db.query<{ chain: number; balance: string; threshold: string }>(
          `SELECT (payload ->> 'chainId')::int AS chain, payload ->> 'balance' AS balance,
             payload ->> 'threshold' AS threshold
           FROM event_outbox WHERE project_id = $1 AND type = 'balance.low' ORDER BY id`,
          [p.projectId],
        )
      ).map((e) => [e.chain, e.balance, e.threshold]);

    // The project's figure, below both tanks: nothing crosses.
    await put({ thresholdWei: "1000" });
    assert.deepEqual(await alerts(), []);
    // The other chain's own, above its tank: that tank alone crosses, at once.
    const shown = await put({ thresholdWei: (10n ** 17n).toString(), chainId: OTHER });
    assert.deepEqual(shown, {
      thresholdWei: "1000",
      chains: [
        { chainId: HOME, thresholdWei: "1000", own: false },
        { chainId: OTHER, thresholdWei: (10n ** 17n).toString(), own: true },
      ],
    });
    assert.deepEqual(await alerts(), [[OTHER, (10n ** 16n).toString(), (10n ** 17n).toString()]]);

    // Silenced on the other chain: a project figure above every tank now alerts on the home chain only.
    await put({ thresholdWei: null, chainId: OTHER });
    await put({ thresholdWei: (2n * 10n ** 18n).toString() });
    assert.deepEqual((await alerts()).slice(1), [
      [HOME, (await tanks(p.projectId))[HOME]!.toString(), (2n * 10n ** 18n).toString()],
    ]);

    // A reservation takes the other tank below its own threshold: the trigger names the chain.
    const level = (await tanks(p.projectId))[OTHER]!;
    await put({ thresholdWei: level.toString(), chainId: OTHER });
    assert.equal((await alerts()).length, 2);
    await granted(p, OTHER);
    assert.deepEqual((await alerts()).slice(2), [
      [OTHER, (await tanks(p.projectId))[OTHER]!.toString(), level.toString()],
    ]);

    const unknown = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/balance-alert`,
      token: p.ownerToken,
      payload: { thresholdWei: "1", chainId: 999 },
    });
    assert.equal(unknown.statusCode, 404, unknown.body);
    assert.equal(unknown.json().code, "not_found");
  });
});
