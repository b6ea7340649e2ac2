import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { encodeDepositCursor, lockLiveDeposit, markDepositOrphaned } from "../src/funding/store.ts";
import { creditDeposit, reverseCredit } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";
import { watchedDeposit as deposit } from "./support/money.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

type Project = Awaited<ReturnType<typeof seedProject>>;
const watchedDeposit = (p: Project, amountWei: bigint, blockNumber: bigint) =>
  deposit(t.db, p, amountWei, blockNumber);

async function list(p: Project, query = "", token = p.ownerToken) {
  return t.request({ method: "GET", url: `/projects/${p.projectId}/deposits${query}`, token });
}

describe("GET /projects/:id/deposits", () => {
  it("lists credited transfers newest first with chain, transaction, block and the exact amount", async () => {
    const p = await seedProject(t);
    // Beyond 2^53 and beyond 2^64: only a decimal string carries them exactly.
    const first = await watchedDeposit(p, 123_456_789_012_345_678_901_234_567n, 100n);
    const second = await watchedDeposit(p, 9_007_199_254_740_993n, 101n);
    const res = await list(p);
    assert.equal(res.statusCode, 200, res.body);
    const { deposits, nextCursor } = res.json();
    assert.equal(nextCursor, undefined);
    assert.deepEqual(
      deposits.map((d: Record<string, unknown>) => [
        d.chain_id,
        d.tx_hash,
        d.block_number,
        d.amount,
        d.status,
      ]),
      [
        [14601, second.txHash, 101, "9007199254740993", "credited"],
        [14601, first.txHash, 100, "123456789012345678901234567", "credited"],
      ],
    );
    assert.ok(deposits.every((d: { credited_at: string }) => !Number.isNaN(Date.parse(d.credited_at))));
    assert.match(res.body, /"amount":"123456789012345678901234567"/);
  });

  it("shows a credit a reorganisation took back as reversed, with what was taken back", async () => {
    const p = await seedProject(t);
    const kept = await watchedDeposit(p, 5n, 200n);
    const gone = await watchedDeposit(p, 7n, 201n);
    await t.db.transaction(async (tx) => {
      const [reorg] = await tx.query<{ id: string }>(
        `INSERT INTO chain_reorgs (chain_id, watcher, fork_block, depth, orphaned)
         VALUES (14601, 'deposits', 201, 1, $1::jsonb) RETURNING id`,
        [JSON.stringify([{ number: "201", hash: gone.blockHash }])],
      );
      const [live] = await tx.query<{ reference: string }>(
        "SELECT reference FROM chain_deposits WHERE tx_hash = $1",
        [gone.txHash],
      );
      const credit = await lockLiveDeposit(tx, 14601, {
        txHash: gone.txHash,
        position: "0",
        inclusion: 0,
        blockHash: gone.blockHash,
        projectId: p.projectId,
        amountWei: 7n,
        reference: live!.reference,
      });
      assert.ok(credit);
      const { reversedWei } = await reverseCredit(tx, {
        projectId: p.projectId,
        chainId: 14601,
        reference: `reorg:${credit.reference}:${gone.blockHash}`,
        amountWei: 7n,
      });
      await markDepositOrphaned(tx, 14601, credit, Number(reorg!.id), reversedWei);
    });
    const res = await list(p);
    assert.equal(res.statusCode, 200, res.body);
    const [newest, oldest] = res.json().deposits;
    assert.deepEqual([newest.tx_hash, newest.status, newest.reversed_amount], [gone.txHash, "reversed", "7"]);
    assert.ok(newest.reversed_at);
    assert.deepEqual(
      [oldest.tx_hash, oldest.status, oldest.reversed_amount, oldest.reversed_at],
      [kept.txHash, "credited", "0", null],
    );
  });

  it("lists a credit made without a chain transfer with no transfer fields, on the tank it credited", async () => {
    const p = await seedProject(t);
    await creditDeposit(t.db, { projectId: p.projectId, reference: `top-up:${p.projectId}`, amountWei: 42n });
    await creditDeposit(t.db, {
      projectId: p.projectId,
      chainId: 31337,
      reference: `top-up-2:${p.projectId}`,
      amountWei: 43n,
    });
    const deposits = (await list(p)).json().deposits as Record<string, unknown>[];
    assert.deepEqual(
      deposits.map((d) => [d.chain_id, d.tx_hash, d.block_number, d.amount]),
      [
        [31337, null, null, "43"],
        [14601, null, null, "42"],
      ],
    );
  });

  it("never shows another project's deposits, and answers another tenant 404", async () => {
    const mine = await seedProject(t);
    const theirs = await seedProject(t, { email: "other-tenant@example.com" });
    await watchedDeposit(mine, 1n, 300n);
    const other = await watchedDeposit(theirs, 2n, 301n);
    const own = (await list(mine)).json().deposits;
    assert.equal(own.length, 1);
    assert.ok(own.every((d: { tx_hash: string }) => d.tx_hash !== other.txHash));
    assert.equal((await list(theirs, "", mine.ownerToken)).statusCode, 404);
    // A key reaches only its own project.
    const keyed = await t.request({
      method: "GET",
      url: `/projects/${theirs.projectId}/deposits`,
      headers: { authorization: `Bearer ${mine.apiKey}` },
    });
    assert.ok([403, 404].includes(keyed.statusCode), keyed.body);
  });

  it("refuses a missing credential with 401 and a sponsor-only key with 403", async () => {
    const p = await seedProject(t);
    const none = await t.request({ method: "GET", url: `/projects/${p.projectId}/deposits` });
    assert.equal(none.statusCode, 401);
    assert.equal(none.json().code, "unauthorized");
    const sponsorKey = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/deposits`,
      headers: { authorization: `Bearer ${p.apiKey}` },
    });
    assert.equal(sponsorKey.statusCode, 403);
    assert.equal(sponsorKey.json().code, "forbidden");
  });

  it("pages by cursor through every deposit exactly once", async () => {
    const p = await seedProject(t);
    const made: string[] = [];
    for (let i = 0; i < 7; i++)
      made.unshift((await watchedDeposit(p, BigInt(i + 1), BigInt(400 + i))).txHash);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const res = await list(p, `?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      seen.push(...body.deposits.map((d: { tx_hash: string }) => d.tx_hash));
      cursor = body.nextCursor;
      if (!cursor) break;
      assert.equal(body.deposits.length, 3);
    }
    assert.deepEqual(seen, made);
  });

  it("answers a bad limit or cursor 400 with a stable code", async () => {
    const p = await seedProject(t);
    for (const query of ["?limit=0", "?limit=201", "?limit=ten", "?limit=1.5"]) {
      const res = await list(p, query);
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.headers["content-type"], "application/problem+json; charset=utf-8");
      assert.equal(res.json().code, "invalid_request", query);
    }
    const forged = Buffer.from("d1:0").toString("base64url");
    const eventsCursor = Buffer.from("e1:5").toString("base64url");
    for (const cursor of ["nonsense", forged, eventsCursor, `${encodeDepositCursor(5)}!`, "x".repeat(65)]) {
      const res = await list(p, `?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(res.statusCode, 400, cursor);
      assert.match(res.json().code, /^invalid_(cursor|request)$/, cursor);
    }
    const res = await list(p, `?cursor=${eventsCursor}`);
    assert.equal(res.json().code, "invalid_cursor");
    assert.equal((await list(p, "?page=2")).json().code, "invalid_request");
  });
});
