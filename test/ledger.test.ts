import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { billOperation, creditDeposit, release, reserve, reserveMany } from "../src/ledger/ledger.ts";
import { seedProject, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const SELECTOR = "0xa0712d68";
const PAYMASTER = "0x00000000000000000000000000000000000000aa";

async function allowlisted(p: { projectId: string; ownerToken: string }) {
  const res = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: TARGET, functionSelector: SELECTOR },
  });
  assert.equal(res.statusCode, 201);
}

function reservation(projectId: string, costWei: bigint) {
  return {
    projectId,
    clientNonce: null,
    requestDigest: null,
    authId: `0x${randomBytes(32).toString("hex")}`,
    apiKeyId: null,
    chainId: 14601,
    sender: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    target: TARGET,
    selector: SELECTOR,
    estimatedGas: 100_000n,
    maxGasCostWei: costWei,
    maxFeePerGasWei: 2_000_000_000n,
    maxPriorityFeePerGasWei: 1_000_000_000n,
    paymaster: PAYMASTER,
    validAfterSec: 1_800_000_000,
    validUntilSec: 1_800_000_300,
    response: null,
    requestedAtMs: Date.now(),
  };
}

async function state(projectId: string) {
  const [row] = await t.db.query<{ cached: string; ledger: string }>(
    `SELECT p.gas_tank_balance::text AS cached,
       COALESCE((SELECT sum(amount) FROM ledger_entries WHERE project_id = p.id), 0)::text AS ledger
     FROM projects p WHERE p.id = $1`,
    [projectId],
  );
  return { cached: BigInt(row!.cached), ledger: BigInt(row!.ledger) };
}

type Op =
  | { kind: "deposit"; amount: bigint; ref: number }
  | { kind: "reserve"; cost: bigint }
  | { kind: "settle"; pick: number; fraction: number; reverted: boolean }
  | { kind: "release"; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("deposit" as const),
    amount: fc.bigInt(1n, 10n ** 20n),
    ref: fc.integer({ min: 0, max: 5 }),
  }),
  fc.record({ kind: fc.constant("reserve" as const), cost: fc.bigInt(0n, 10n ** 19n) }),
  fc.record({
    kind: fc.constant("settle" as const),
    pick: fc.nat(),
    fraction: fc.integer({ min: 0, max: 100 }),
    reverted: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
);

function move<T>(item: T, from: T[], to: T[]): void {
  from.splice(from.indexOf(item), 1);
  to.push(item);
}

describe("gas tank ledger laws", () => {
  it("over random reserve/settle/release/late-charge/deposit sequences (with repeats) the balance never goes negative and equals the sum of the entries", async () => {
    const seeded = await seedProject(t);
    await allowlisted(seeded);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
        // Each run gets its own project, so runs cannot interfere.
        const projectId = `law-${run++}-${randomBytes(3).toString("hex")}`;
        await t.db.query(
          "INSERT INTO projects (id, org_id, owner, name, deposit_address) SELECT $1, org_id, owner, 'law', $2 FROM projects WHERE id = $3",
          [projectId, `0x${randomBytes(20).toString("hex")}`, seeded.projectId],
        );
        await t.db.query(
          "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
          [projectId, TARGET, SELECTOR],
        );
        let model = 0n;
        const pending: { authId: string; cost: bigint }[] = [];
        const released: { authId: string; cost: bigint }[] = [];
        const settled: { authId: string; cost: bigint }[] = [];
        const depositsSeen = new Set<number>();
        for (const op of ops) {
          if (op.kind === "deposit") {
            const applied = await creditDeposit(t.db, {
              projectId,
              reference: `${projectId}:${op.ref}`,
              amountWei: op.amount,
            });
            assert.equal(applied, !depositsSeen.has(op.ref), "a deposit reference is credited exactly once");
            if (applied) model += op.amount;
            depositsSeen.add(op.ref);
          } else if (op.kind === "reserve") {
            const r = reservation(projectId, op.cost);
            const outcome = await reserve(t.db, r);
            assert.equal(outcome.kind, model >= op.cost ? "reserved" : "insufficient_balance");
            if (outcome.kind === "reserved") {
              model -= op.cost;
              pending.push({ authId: r.authId, cost: op.cost });
            }
          } else {
            const pool = [...pending, ...released, ...settled];
            if (pool.length === 0) continue;
            const target = pool[op.pick % pool.length]!;
            if (op.kind === "settle") {
              const actual = (target.cost * BigInt(op.fraction)) / 100n;
              const billing = await t.db.transaction((tx) =>
                billOperation(tx, {
                  authId: target.authId,
                  chainId: 14601,
                  paymaster: PAYMASTER,
                  outcome: op.reverted ? "reverted" : "success",
                  actualGasUsed: 21_000n,
                  actualGasCostWei: actual,
                  txHash: `0x${"1".repeat(64)}`,
                  userOpHash: `0x${"2".repeat(64)}`,
                }),
              );
              if (pending.includes(target)) {
                // An open reservation: the tank keeps the actual cost, the rest comes back.
                assert.deepEqual(billing.kind === "charged" && [billing.billedWei, billing.late], [
                  actual,
                  false,
                ]);
                model += target.cost - actual;
                move(target, pending, settled);
              } else if (released.includes(target)) {
                // Released, then seen on chain: charged late, never below zero.
                const due = actual < model ? actual : model;
                assert.deepEqual(billing.kind === "charged" && [billing.billedWei, billing.late], [
                  due,
                  true,
                ]);
                model -= due;
                move(target, released, settled);
              } else {
                assert.equal(billing.kind, "unbilled", "an authorization is charged once");
              }
            } else {
              const applied = await release(t.db, target.authId);
              assert.equal(
                applied,
                pending.includes(target),
                "release applies once, and only to open reservations",
              );
              if (applied) {
                model += target.cost;
                move(target, pending, released);
              }
            }
          }
          const s = await state(projectId);
          assert.ok(s.cached >= 0n, "the balance never goes negative");
          assert.equal(s.cached, s.ledger, "the cached balance equals the sum of the entries");
          assert.equal(s.cached, model, "the balance matches the model");
        }
      }),
      { numRuns: 25 },
    );
  });

  it("the ledger is append-only: the database refuses to update or delete an entry", async () => {
    const p = await seedProject(t);
    await creditDeposit(t.db, { projectId: p.projectId, reference: "append-only", amountWei: 5n });
    await assert.rejects(
      t.db.query("UPDATE ledger_entries SET amount = 500 WHERE reference = 'append-only'"),
      /append-only/,
    );
    await assert.rejects(
      t.db.query("DELETE FROM ledger_entries WHERE reference = 'append-only'"),
      /append-only/,
    );
  });

  it("a CHECK keeps the cached balance from ever going below zero", async () => {
    const p = await seedProject(t);
    await assert.rejects(
      t.db.query("UPDATE projects SET gas_tank_balance = gas_tank_balance - 1 WHERE id = $1", [p.projectId]),
      /check/i,
    );
  });
});

describe("one batch, one nonce twice", () => {
  it("the second use of a nonce in the same batch is a replay of the first, with its stored response, and reserves nothing more", async () => {
    const p = await seedProject(t, { slug: `nb-${randomBytes(3).toString("hex")}` });
    await allowlisted(p);
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `nb:${p.projectId}`,
      amountWei: 10n ** 18n,
    });
    const first = {
      ...reservation(p.projectId, 1_000n),
      clientNonce: "n-1",
      requestDigest: "d1",
      response: "r1",
    };
    const again = {
      ...reservation(p.projectId, 1_000n),
      clientNonce: "n-1",
      requestDigest: "d1",
      response: "r2",
    };
    const other = {
      ...reservation(p.projectId, 1_000n),
      clientNonce: "n-1",
      requestDigest: "d2",
      response: "r3",
    };
    const outcomes = await reserveMany(t.db, p.projectId, [first, again, other]);
    assert.deepEqual(outcomes, [
      { kind: "reserved" },
      { kind: "replay", requestDigest: "d1", response: "r1" },
      { kind: "replay", requestDigest: "d1", response: "r1" },
    ]);
    const before = 10n ** 18n;
    assert.deepEqual(await state(p.projectId), { cached: before - 1_000n, ledger: before - 1_000n });
    // And across batches, as before.
    assert.deepEqual(await reserveMany(t.db, p.projectId, [{ ...again, authId: `0x${"ab".repeat(32)}` }]), [
      { kind: "replay", requestDigest: "d1", response: "r1" },
    ]);
  });
});

describe("funds parity", () => {
  it("reports drift after the cached balance is changed behind the service's back, and filters with onlyDrift", async () => {
    const token = await t.token("parity@example.com");
    const slug = `parity-${randomBytes(3).toString("hex")}`;
    assert.equal(
      (await t.request({ method: "POST", url: "/orgs", token, payload: { name: "P", slug } })).statusCode,
      201,
    );
    for (const id of ["par-a", "par-b", "par-c"]) {
      const res = await t.request({
        method: "POST",
        url: "/projects",
        token,
        payload: { id, name: id, owner: slug },
      });
      assert.equal(res.statusCode, 201);
      await creditDeposit(t.db, { projectId: id, reference: `parity:${id}`, amountWei: 1000n });
    }
    await t.db.query("UPDATE projects SET gas_tank_balance = 1234 WHERE id = 'par-b'");

    const single = await t.request({ method: "GET", url: "/projects/par-b/funds/parity", token });
    assert.deepEqual(single.json(), {
      projectId: "par-b",
      ledgerBalance: "1000",
      cachedBalance: "1234",
      delta: "234",
      inSync: false,
      // Every tank of the project (migration 035); this one has its home chain's alone.
      chains: [{ chainId: 14601, ledgerBalance: "1000", cachedBalance: "1234", delta: "234", inSync: false }],
    });
    const all = await t.request({ method: "GET", url: "/projects/funds/parity-report", token });
    assert.equal(all.json().total, 3);
    assert.equal(all.json().driftCount, 1);
    assert.equal(all.json().projects.length, 3);
    const drift = await t.request({
      method: "GET",
      url: "/projects/funds/parity-report?onlyDrift=true",
      token,
    });
    assert.deepEqual(
      drift.json().projects.map((p: { projectId: string }) => p.projectId),
      ["par-b"],
    );
    const org = await t.request({ method: "GET", url: `/orgs/${slug}/funds/parity?onlyDrift=true`, token });
    assert.equal(org.json().total, 3);
    assert.deepEqual(
      org.json().projects.map((p: { projectId: string }) => p.projectId),
      ["par-b"],
    );
    const bad = await t.request({ method: "GET", url: `/orgs/${slug}/funds/parity?onlyDrift=maybe`, token });
    assert.equal(bad.statusCode, 400);
    const stranger = await t.token("stranger@example.com");
    assert.equal(
      (await t.request({ method: "GET", url: `/orgs/${slug}/funds/parity`, token: stranger })).statusCode,
      404,
    );
    assert.equal(
      (await t.request({ method: "GET", url: "/projects/par-b/funds/parity", token: stranger })).statusCode,
      404,
    );
    const strangers = await t.request({
      method: "GET",
      url: "/projects/funds/parity-report",
      token: stranger,
    });
    assert.equal(strangers.json().total, 0);
  });
});

describe("authorization ids (migration 048: looked up by their first 64 bits, then whole)", () => {
  it("an id already reserved is refused and its batch changes nothing; ids sharing their first 64 bits stay apart", async () => {
    const p = await seedProject(t, { slug: `ai-${randomBytes(3).toString("hex")}` });
    await allowlisted(p);
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `ai:${p.projectId}`,
      amountWei: 10n ** 18n,
    });
    const prefix = randomBytes(8).toString("hex");
    const a = { ...reservation(p.projectId, 1_000n), authId: `0x${prefix}${"aa".repeat(24)}` };
    const b = { ...reservation(p.projectId, 2_000n), authId: `0x${prefix}${"bb".repeat(24)}` };
    assert.deepEqual(await reserveMany(t.db, p.projectId, [a]), [{ kind: "reserved" }]);
    assert.deepEqual(await reserveMany(t.db, p.projectId, [b]), [{ kind: "reserved" }]);
    const before = await state(p.projectId);
    assert.deepEqual(before.cached, 10n ** 18n - 3_000n);

    // The same id again, beside a new one: the whole batch is refused, as the unique index on
    // sponsorships.auth_id refused it before migration 048.
    await assert.rejects(
      reserveMany(t.db, p.projectId, [reservation(p.projectId, 500n), { ...a, maxGasCostWei: 700n }]),
      (err: { code?: string }) => err.code === "23505",
    );
    assert.deepEqual(await state(p.projectId), before);
    const [count] = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1",
      [p.projectId],
    );
    assert.equal(count!.n, 2);

    // Settling one charges that one only, though both share the index's key.
    const billing = await t.db.transaction((tx) =>
      billOperation(tx, {
        authId: b.authId,
        chainId: 14601,
        paymaster: PAYMASTER,
        outcome: "success",
        actualGasUsed: 21_000n,
        actualGasCostWei: 1_500n,
        txHash: `0x${"1".repeat(64)}`,
        userOpHash: `0x${"2".repeat(64)}`,
      }),
    );
    assert.equal(billing.kind === "charged" && billing.billedWei, 1_500n);
    const statuses = await t.db.query<{ id: string; status: string; cost: string }>(
      `SELECT '0x' || encode(auth_id, 'hex') AS id, status, actual_gas_cost::text AS cost
       FROM sponsorships WHERE project_id = $1 ORDER BY seq`,
      [p.projectId],
    );
    assert.deepEqual(statuses, [
      { id: a.authId, status: "pending", cost: "0" },
      { id: b.authId, status: "success", cost: "1500" },
    ]);
    assert.deepEqual(await state(p.projectId), {
      cached: before.cached + 500n,
      ledger: before.cached + 500n,
    });
    assert.equal(await release(t.db, a.authId), true);
    assert.equal(await release(t.db, b.authId), false);
  });
});

describe("the allowlist, decided for a whole batch at once (issue 22: one join per batch)", () => {
  it("names each item's first call off the allowlist, as a call-by-call check of the same entries would, over random batches", async () => {
    const seeded = await seedProject(t);
    await creditDeposit(t.db, {
      projectId: seeded.projectId,
      reference: `allow:${randomBytes(4).toString("hex")}`,
      amountWei: 10n ** 24n,
    });
    const OTHER_CHAIN = 31337;
    const targets = [
      TARGET,
      "0x00000000000000000000000000000000000000c1",
      "0x00000000000000000000000000000000000000c2",
    ];
    const selectors = [SELECTOR, "0x12345678"];
    // The entries: every (target, selector) pair in one of five states.
    const states = ["none", "any chain", "this chain", "other chain", "disabled"] as const;
    const pairs = targets.flatMap((target) => selectors.map((selector) => ({ target, selector })));
    const call = fc.record({ target: fc.constantFrom(...targets), selector: fc.constantFrom(...selectors) });
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...states), { minLength: pairs.length, maxLength: pairs.length }),
        // Each item: a plain call (null), or an operation's calls, none included.
        fc.array(fc.option(fc.array(call, { maxLength: 4 }), { nil: null }), { minLength: 1, maxLength: 12 }),
        async (entryStates, items) => {
          const projectId = `allow-${run++}-${randomBytes(3).toString("hex")}`;
          await t.db.query(
            "INSERT INTO projects (id, org_id, owner, name, deposit_address) SELECT $1, org_id, owner, 'allow', $2 FROM projects WHERE id = $3",
            [projectId, `0x${randomBytes(20).toString("hex")}`, seeded.projectId],
          );
          await creditDeposit(t.db, { projectId, reference: `${projectId}:fund`, amountWei: 10n ** 24n });
          const allowed = new Set<string>();
          for (const [i, state] of entryStates.entries()) {
            const { target, selector } = pairs[i]!;
            if (state === "none") continue;
            await t.db.query(
              "INSERT INTO allowlist_entries (project_id, chain_id, target_contract, function_selector, enabled) VALUES ($1, $2, $3, $4, $5)",
              [
                projectId,
                state === "this chain" ? 14601 : state === "other chain" ? OTHER_CHAIN : null,
                target,
                selector,
                state !== "disabled",
              ],
            );
            if (state === "any chain" || state === "this chain") allowed.add(`${target}/${selector}`);
          }
          const batch = items.map((calls) => ({
            ...reservation(projectId, 1_000n),
            ...(calls === null ? {} : { calls }),
          }));
          const outcomes = await reserveMany(t.db, projectId, batch);
          for (const [i, r] of batch.entries()) {
            const calls = r.calls ?? [{ target: r.target, selector: r.selector }];
            const first = calls.findIndex((c) => !allowed.has(`${c.target}/${c.selector}`));
            assert.deepEqual(
              outcomes[i],
              first === -1 ? { kind: "reserved" } : { kind: "not_allowlisted", callIndex: first },
              `item ${i}: ${JSON.stringify(calls)}`,
            );
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
