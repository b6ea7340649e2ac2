/**
 * Spend alerts at thresholds (issue 24): `budget.threshold` when a project-wide budget — the
 * daily cap, a project spend or count cap — is used to 50, 75, 90 and 100 %, each level once per
 * window, written by the reservation itself (db/functions/budget_threshold_emit.sql). Per-sender caps
 * announce nothing; a count that falls back (a release) and crosses again repeats nothing.
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
import { addWebhookEndpoint } from "./support/receiver.ts";

let t: TestApp;
let senders = 0;
const freshSender = () => `0x${(0xb0d9e7000 + ++senders).toString(16).padStart(40, "0")}`;

before(async () => {
  t = await startTestApp();
});
after(() => t.close());

async function project(opts: { subscribe?: boolean } = {}) {
  const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 20n);
  if (opts.subscribe !== false) {
    await addWebhookEndpoint(t, p, "https://hooks.example.com/budget", ["budget.threshold"]);
  }
  return p;
}

const authorize = (p: { projectId: string; apiKey: string }, user?: string) => authorizeMint(t, p, user);

async function grant(p: { projectId: string; apiKey: string }, n: number) {
  for (let i = 0; i < n; i++) {
    const res = await authorize(p);
    assert.equal(res.statusCode, 200, res.body);
  }
}

interface Alert {
  ruleId: string;
  kind: string;
  percent: number;
  window: string | null;
  maxWei: string | null;
  maxOperations: number | null;
  spentWei: string;
  operations: number | null;
}

async function alerts(projectId: string): Promise<Alert[]> {
  const rows = await t.db.query<{ payload: Alert }>(
    "SELECT payload FROM event_outbox WHERE project_id = $1 AND type = 'budget.threshold' ORDER BY id",
    [projectId],
  );
  return rows.map((r) => r.payload);
}

describe("budget.threshold", () => {
  test("the daily cap announces 50, 75, 90 and 100 % once each; a release and a second crossing repeat nothing", async () => {
    const p = await project();
    await grant(p, 1);
    const [{ cost }] = (await t.db.query<{ cost: string }>(
      "SELECT max_gas_cost::text AS cost FROM sponsorships WHERE project_id = $1",
      [p.projectId],
    )) as [{ cost: string }];
    const cap = 10n * BigInt(cost);
    const set = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: cap.toString() },
    });
    assert.equal(set.statusCode, 200, set.body);
    const percents = async () => (await alerts(p.projectId)).map((a) => a.percent);

    await grant(p, 3); // 4 of 10
    assert.deepEqual(await percents(), []);
    await grant(p, 1); // 5 of 10
    assert.deepEqual(await percents(), [50]);
    await grant(p, 2); // 7 of 10
    assert.deepEqual(await percents(), [50]);
    await grant(p, 1); // 8 of 10
    assert.deepEqual(await percents(), [50, 75]);
    await grant(p, 1); // 9 of 10
    assert.deepEqual(await percents(), [50, 75, 90]);

    // A release gives one back (the same call settlement and expiry make), and the next
    // reservation crosses 90 % again: nothing is repeated.
    await t.db.query(
      "SELECT daily_usage_adjust($1, 14601, (now() AT TIME ZONE 'UTC')::date, -($2::numeric))",
      [p.projectId, cost],
    );
    await grant(p, 1);
    assert.deepEqual(await percents(), [50, 75, 90]);
    await grant(p, 1); // 10 of 10
    assert.deepEqual(await percents(), [50, 75, 90, 100]);
    const refused = await authorize(p);
    assert.equal((refused.json() as { code: string }).code, "daily_cap_exceeded");
    assert.deepEqual(await percents(), [50, 75, 90, 100], "a refusal announces nothing");

    const last = (await alerts(p.projectId)).at(-1)!;
    assert.deepEqual(
      { ...last, spentWei: BigInt(last.spentWei) },
      {
        ...last,
        ruleId: "daily_cap",
        kind: "project_spend_cap",
        window: "day",
        maxWei: cap.toString(),
        maxOperations: null,
        operations: null,
        spentWei: cap,
      },
    );
  });

  test("a project count cap announces the highest level reached; a per-sender cap announces nothing", async () => {
    const p = await project();
    const put = (id: string, body: object) =>
      t.request({
        method: "PUT",
        url: `/projects/${p.projectId}/policies/${id}`,
        token: p.ownerToken,
        payload: body,
      });
    assert.equal(
      (await put("four-a-day", { kind: "project_count_cap", maxOperations: 4, window: "day" })).statusCode,
      201,
    );
    assert.equal(
      (await put("two-each", { kind: "sender_count_cap", maxOperations: 2, window: "lifetime" })).statusCode,
      201,
    );
    for (const expected of [[], [50], [50, 75], [50, 75, 100]]) {
      const res = await authorize(p);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(
        (await alerts(p.projectId)).map((a) => [a.ruleId, a.percent]),
        expected.map((n) => ["four-a-day", n]),
      );
    }
    const [full] = (await alerts(p.projectId)).slice(-1);
    assert.equal(full!.operations, 4);
    assert.equal(full!.maxOperations, 4);
    // The per-sender cap: one player at its limit, nothing announced for it.
    const q = await project();
    await t.request({
      method: "PUT",
      url: `/projects/${q.projectId}/policies/two-each`,
      token: q.ownerToken,
      payload: { kind: "sender_count_cap", maxOperations: 2, window: "lifetime" },
    });
    const one = freshSender();
    await authorize(q, one);
    await authorize(q, one);
    assert.deepEqual(await alerts(q.projectId), []);
  });

  test("with no endpoint subscribed nothing is written, and the level is still kept (no burst when one subscribes)", async () => {
    const p = await project({ subscribe: false });
    const put = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/policies/two-a-day`,
      token: p.ownerToken,
      payload: { kind: "project_count_cap", maxOperations: 2, window: "day" },
    });
    assert.equal(put.statusCode, 201, put.body);
    await grant(p, 1); // 50 %
    assert.deepEqual(await alerts(p.projectId), []);
    await addWebhookEndpoint(t, p, "https://hooks.example.com/late", ["budget.threshold"]);
    await grant(p, 1); // 100 %
    assert.deepEqual(
      (await alerts(p.projectId)).map((a) => a.percent),
      [100],
    );
  });
});
