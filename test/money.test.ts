import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { fundedProject, seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { MONEY_SELECTOR, MONEY_TARGET, reserveMint, spend, utcDayAgo } from "./support/money.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const call = { target: MONEY_TARGET, selector: MONEY_SELECTOR };

async function moneyOf(p: { projectId: string; ownerToken: string }, token = p.ownerToken) {
  return t.request({ method: "GET", url: `/projects/${p.projectId}/analytics/money`, token });
}

describe("GET /projects/:id/analytics/money", () => {
  it("tells available, reserved, spent per day and in total, and days of gas left, in exact wei", async () => {
    // Past 2^64 wei, so that any float on the way would show.
    const tank = 100_000_000_000_000_000_000_000n;
    const p = await fundedProject(t, call, tank);
    await spend(t.db, p.projectId, 3_000_000_000_000_000_000n, 0);
    await spend(t.db, p.projectId, 4_000_000_000_000_000_000n, 2);
    // Outside the 7-day window: counted in the total only.
    await spend(t.db, p.projectId, 50_000_000_000_000_000_000n, 9);
    await reserveMint(t.db, p.projectId, 123_456_789n);
    await reserveMint(t.db, p.projectId, 1n);
    const res = await moneyOf(p);
    assert.equal(res.statusCode, 200, res.body);
    const m = res.json();
    const available = tank - 57_000_000_000_000_000_000n - 123_456_790n;
    assert.equal(m.available, available.toString());
    assert.equal(m.reserved, "123456790");
    assert.equal(m.spentTotal, "57000000000000000000");
    assert.equal(m.spentToday, "3000000000000000000");
    assert.equal(m.spentLast7Days, "7000000000000000000");
    assert.equal(m.averageDailySpend, "1000000000000000000");
    // available ÷ 1 S a day, rounded down to a tenth.
    assert.equal(m.daysOfGasLeft, Number((available * 10n) / 1_000_000_000_000_000_000n) / 10);
    assert.deepEqual(
      m.last7Days.map((d: { day: string }) => d.day),
      [6, 5, 4, 3, 2, 1, 0].map((n) => utcDayAgo(n)),
    );
    assert.equal(m.last7Days[4].spent, "4000000000000000000");
    assert.equal(m.last7Days[6].spent, "3000000000000000000");
    // The balance route and the money view tell the same available amount.
    const balance = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/balance`,
      token: p.ownerToken,
    });
    assert.equal(balance.json().balance, m.available);
  });

  it("has no days of gas left to tell when nothing was spent in the last 7 days", async () => {
    const p = await fundedProject(t, call, 10n ** 18n);
    await spend(t.db, p.projectId, 5n, 8);
    const m = (await moneyOf(p)).json();
    assert.equal(m.daysOfGasLeft, null);
    assert.equal(m.spentLast7Days, "0");
    assert.equal(m.spentTotal, "5");
  });

  it("answers a new project with zeros", async () => {
    const p = await seedProject(t);
    const m = (await moneyOf(p)).json();
    assert.deepEqual([m.available, m.reserved, m.spentTotal, m.daysOfGasLeft], ["0", "0", "0", null]);
  });

  it("counts only the project's own reservations and spend, and answers another tenant 404", async () => {
    const mine = await fundedProject(t, call, 1_000n);
    const theirs = await fundedProject(t, call, 1_000n, { email: "money-other@example.com" });
    await reserveMint(t.db, theirs.projectId, 100n);
    await spend(t.db, theirs.projectId, 50n);
    const m = (await moneyOf(mine)).json();
    assert.deepEqual([m.available, m.reserved, m.spentTotal], ["1000", "0", "0"]);
    const other = await moneyOf(theirs, mine.ownerToken);
    assert.equal(other.statusCode, 404);
    assert.equal(other.json().code, "not_found");
    const none = await t.request({ method: "GET", url: `/projects/${mine.projectId}/analytics/money` });
    assert.equal(none.statusCode, 401);
    const sponsorKey = await t.request({
      method: "GET",
      url: `/projects/${mine.projectId}/analytics/money`,
      headers: { authorization: `Bearer ${mine.apiKey}` },
    });
    assert.equal(sponsorKey.statusCode, 403);
  });
});
