import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Address, type Hex, hashTypedData, recoverAddress } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { fixedFeeOracle } from "../src/chains/fee-oracle.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { callSponsorshipDigest, callSponsorshipTypedData } from "../src/paymaster/digest.ts";
import { decodePaymasterAndData } from "../src/paymaster/layout.ts";
import {
  fundedProject as fundedProjectIn,
  seedProject,
  startTestApp,
  TEST_PAYMASTER,
  TEST_SIGNER_KEY,
  type TestApp,
} from "./support/app.ts";

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const MINT = "0xa0712d68";
const USER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
// The test app's fixed fees (TEST_FEES: 1 gwei base, 1 gwei priority) give these ceilings.
const FEE_CAP_WEI = 2_500_000_000n;
const PRIORITY_CAP_WEI = 1_000_000_000n;
const GAS = 150_000;
const COST = BigInt(GAS) * FEE_CAP_WEI;

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

/** The store of the main test app, for a second instance with other settings. */
const sharedDb = () => ({ db: t.db, schema: null, drop: async () => {} });

function fundedProject(balanceWei: bigint, opts: Parameters<typeof seedProject>[1] = {}) {
  return fundedProjectIn(t, { target: GAME, selector: MINT }, balanceWei, opts);
}

function authorize(apiKey: string | undefined, body: Record<string, unknown>) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    ...(apiKey ? { token: apiKey } : {}),
    payload: body,
  });
}

const bodyFor = (projectId: string, extra: Record<string, unknown> = {}) => ({
  projectId,
  user: USER,
  target: GAME,
  selector: MINT,
  estimatedGas: GAS,
  chainId: 14601,
  ...extra,
});

async function balanceOf(projectId: string): Promise<bigint> {
  const rows = await t.db.query<{ b: string }>(
    "SELECT gas_tank_balance::text AS b FROM projects WHERE id = $1",
    [projectId],
  );
  return BigInt(rows[0]!.b);
}

describe("POST /sponsor/authorize: the grant", () => {
  it("signs exactly what the paymaster verifies and reserves the gas ceiling at the fee ceiling", async () => {
    const p = await fundedProject(10n * COST);
    const res = await authorize(p.apiKey, bodyFor(p.projectId));
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.authorized, true);
    assert.equal(body.maxGasCost, COST.toString());
    assert.equal(body.maxTotalGas, String(GAS));
    assert.equal(body.maxFeePerGas, FEE_CAP_WEI.toString());
    assert.equal(body.maxPriorityFeePerGas, PRIORITY_CAP_WEI.toString());
    // validAfter is backdated by CLOCK_SKEW_SEC (60); validUntil is now + the TTL (300).
    assert.equal(body.validUntil - body.validAfter, 300 + 60);
    assert.equal(body.paymaster.toLowerCase(), TEST_PAYMASTER);

    const pmd = decodePaymasterAndData(body.paymasterAndData);
    assert.ok(pmd && pmd.mode === "call", "call-authorization layout");
    assert.equal(pmd.paymaster.toLowerCase(), TEST_PAYMASTER);
    assert.equal(pmd.gas.verificationGasLimit.toString(), body.paymasterVerificationGasLimit);
    assert.equal(pmd.gas.postOpGasLimit.toString(), body.paymasterPostOpGasLimit);
    assert.equal(pmd.maxTotalGas, BigInt(GAS));
    assert.equal(pmd.maxFeePerGasWei, FEE_CAP_WEI);
    assert.equal(pmd.maxPriorityFeePerGasWei, PRIORITY_CAP_WEI);
    assert.equal(pmd.validUntilSec, body.validUntil);
    assert.equal(pmd.validAfterSec, body.validAfter);
    assert.equal(pmd.authId, body.authorizationId);
    assert.equal(pmd.signature, body.signature);
    assert.equal(`0x${(body.paymasterAndData as string).slice(2 + 52 * 2)}`, body.paymasterData);
    const digest = callSponsorshipDigest({ chainId: 14601, paymaster: TEST_PAYMASTER }, pmd.gas, {
      sender: USER.toLowerCase() as Address,
      senderCodeHash: body.senderCodeHash,
      initCode: "0x",
      target: GAME.toLowerCase() as Address,
      selector: MINT,
      maxTotalGas: BigInt(GAS),
      maxPreVerificationGas: BigInt(body.maxPreVerificationGas),
      maxFeePerGasWei: FEE_CAP_WEI,
      maxPriorityFeePerGasWei: PRIORITY_CAP_WEI,
      validUntilSec: body.validUntil,
      validAfterSec: body.validAfter,
      authId: body.authorizationId,
    });
    assert.equal(
      await recoverAddress({ hash: digest, signature: body.signature }),
      privateKeyToAddress(TEST_SIGNER_KEY),
    );
    assert.equal(await balanceOf(p.projectId), 9n * COST);

    const events = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/events`,
      token: p.ownerToken,
    });
    assert.equal(events.json().total, 1);
    assert.equal(events.json().events[0].status, "pending");
    assert.equal(events.json().events[0].estimated_gas, GAS);
  });

  it("every authorization gets a fresh authId", async () => {
    const p = await fundedProject(10n * COST);
    const a = (await authorize(p.apiKey, bodyFor(p.projectId))).json();
    const b = (await authorize(p.apiKey, bodyFor(p.projectId))).json();
    assert.notEqual(a.authorizationId, b.authorizationId);
    assert.notEqual(a.signature, b.signature);
  });

  it("prices at the chain's market: the reservation follows the fee oracle, not a fixed cap", async () => {
    const fees = fixedFeeOracle({ baseFeePerGasWei: 10_000_000_000n, priorityFeePerGasWei: 2_000_000_000n });
    const b = await startTestApp({ db: sharedDb(), feeOracle: fees });
    try {
      const p = await fundedProject(10n ** 18n);
      const res = await b.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: bodyFor(p.projectId),
      });
      assert.equal(res.statusCode, 200, res.body);
      // 10 gwei × 1.5 (the margin on the base fee) + 2 gwei of priority fee, not padded.
      assert.equal(res.json().maxFeePerGas, "17000000000");
      assert.equal(res.json().maxPriorityFeePerGas, "2000000000");
      assert.equal(res.json().maxGasCost, (BigInt(GAS) * 17_000_000_000n).toString());
    } finally {
      await b.close();
    }
  });

  it("503 fee_oracle_stale when the chain's fees are unknown or too old, and nothing is reserved", async () => {
    const fees = fixedFeeOracle(null);
    const b = await startTestApp({ db: sharedDb(), feeOracle: fees });
    try {
      const p = await fundedProject(10n * COST);
      const res = await b.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: bodyFor(p.projectId),
      });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().code, "fee_oracle_stale");
      assert.equal(await balanceOf(p.projectId), 10n * COST);
    } finally {
      await b.close();
    }
  });

  it("pins the call-authorization digest for fixed inputs (known answer, checked against viem's hashTypedData)", () => {
    const paymaster = "0x3333333333333333333333333333333333333333" as Address;
    const gas = { verificationGasLimit: 70_000n, postOpGasLimit: 0n };
    const fixed = {
      sender: "0x1111111111111111111111111111111111111111" as Address,
      target: "0x2222222222222222222222222222222222222222" as Address,
      senderCodeHash: `0x${"cd".repeat(32)}` as Hex,
      initCode: "0x" as Hex,
      selector: "0xa0712d68" as Hex,
      maxTotalGas: 250_000n,
      maxPreVerificationGas: 66_000n,
      maxFeePerGasWei: 17_000_000_000n,
      maxPriorityFeePerGasWei: 2_000_000_000n,
      validUntilSec: 1_800_000_300,
      validAfterSec: 1_800_000_000,
      authId: `0x${"ab".repeat(32)}` as Hex,
    };
    const domain = { chainId: 14601, paymaster };
    const ours = callSponsorshipDigest(domain, gas, fixed);
    assert.equal(ours, hashTypedData(callSponsorshipTypedData(domain, gas, fixed)));
    assert.equal(ours, KNOWN_DIGEST);
  });
});

// Computed once from the inputs above; any change to the typed data changes it.
const KNOWN_DIGEST = "0x426070c1de19e33377d15ffd5c46f5480b2d2b998c3a9828f242307fb41a6288";

describe("POST /sponsor/authorize: refusals, in DESIGN.md's order", () => {
  it("401 for a missing, malformed, unknown, revoked or other project's key", async () => {
    const p = await fundedProject(10n * COST);
    const other = await fundedProject(10n * COST);
    const codes = [];
    codes.push((await authorize(undefined, bodyFor(p.projectId))).statusCode);
    codes.push((await authorize("gsk_short", bodyFor(p.projectId))).statusCode);
    const tampered = `${p.apiKey.slice(0, -1)}${p.apiKey.endsWith("A") ? "B" : "A"}`;
    codes.push((await authorize(tampered, bodyFor(p.projectId))).statusCode);
    codes.push((await authorize(other.apiKey, bodyFor(p.projectId))).statusCode);
    codes.push((await authorize(await t.token("dev@example.com"), bodyFor(p.projectId))).statusCode);
    const keys = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/apikeys`,
      token: p.ownerToken,
    });
    const keyId = keys.json()[0].id;
    const del = await t.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/apikeys/${keyId}`,
      token: p.ownerToken,
    });
    assert.equal(del.statusCode, 200);
    assert.ok(del.json().revoked_at);
    codes.push((await authorize(p.apiKey, bodyFor(p.projectId))).statusCode);
    assert.deepEqual(codes, [401, 401, 401, 401, 401, 401]);
    assert.equal(await balanceOf(p.projectId), 10n * COST);
  });

  it("400 for each malformed field; unknown extra fields are ignored", async () => {
    const p = await fundedProject(10n * COST);
    const bad: Record<string, unknown>[] = [
      { projectId: undefined },
      { user: undefined },
      { target: "0x1234" },
      { user: `${USER}00` },
      { target: "not-an-address" },
      { selector: "0xa0712d" },
      { selector: "0xa0712d6800" },
      { estimatedGas: "150000" },
      { estimatedGas: 0 },
      { estimatedGas: -5 },
      { estimatedGas: 1.5 },
      { estimatedGas: 30_000_001 },
      { chainId: "14601" },
      { chainId: 1 },
      { clientNonce: "" },
      { clientNonce: "x".repeat(200) },
      { clientNonce: "has space" },
      { clientNonce: 42 },
    ];
    for (const patch of bad) {
      const body = bodyFor(p.projectId, patch);
      for (const [k, v] of Object.entries(patch))
        if (v === undefined) delete (body as Record<string, unknown>)[k];
      const res = await authorize(p.apiKey, body);
      assert.equal(res.statusCode, 400, `${JSON.stringify(patch)} → ${res.statusCode} ${res.body}`);
      assert.match(res.json().code, /^(invalid_request|unsupported_chain)$/);
    }
    assert.equal(await balanceOf(p.projectId), 10n * COST);
    const ok = await authorize(p.apiKey, bodyFor(p.projectId, { referrer: "shop", debug: { a: 1 } }));
    assert.equal(ok.statusCode, 200);
  });

  it("403 when the pair is not allowlisted or was disabled", async () => {
    const p = await fundedProject(10n * COST);
    const res = await authorize(p.apiKey, bodyFor(p.projectId, { selector: "0xdeadbeef" }));
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().code, "not_allowlisted");
    const del = await t.request({
      method: "DELETE",
      url: `/projects/${p.projectId}/allowlist`,
      token: p.ownerToken,
      payload: { targetContract: GAME, functionSelector: MINT },
    });
    assert.equal(del.statusCode, 200);
    assert.equal(del.json().enabled, false);
    const after = await authorize(p.apiKey, bodyFor(p.projectId));
    assert.equal(after.statusCode, 403);
    assert.equal(await balanceOf(p.projectId), 10n * COST);
  });

  it("402 insufficient_balance when the tank cannot cover maxGasCost, nothing reserved", async () => {
    const p = await fundedProject(COST - 1n);
    const res = await authorize(p.apiKey, bodyFor(p.projectId));
    assert.equal(res.statusCode, 402);
    assert.equal(res.json().code, "insufficient_balance");
    assert.equal(await balanceOf(p.projectId), COST - 1n);
  });

  it("402 daily_cap_exceeded once the day's reservations reach the cap", async () => {
    const p = await fundedProject(10n * COST);
    const patch = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: (2n * COST).toString() },
    });
    assert.equal(patch.statusCode, 200);
    assert.equal((await authorize(p.apiKey, bodyFor(p.projectId))).statusCode, 200);
    assert.equal((await authorize(p.apiKey, bodyFor(p.projectId))).statusCode, 200);
    const third = await authorize(p.apiKey, bodyFor(p.projectId));
    assert.equal(third.statusCode, 402);
    assert.equal(third.json().code, "daily_cap_exceeded");
    assert.equal(await balanceOf(p.projectId), 8n * COST);
    const overview = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/analytics/overview`,
      token: p.ownerToken,
    });
    assert.equal(overview.json().today.dailyCapRemaining, "0");
  });

  it("429 comes before 400: an exhausted key is refused whatever its body", async () => {
    const p = await fundedProject(10n * COST, { rateLimit: 2 });
    assert.equal((await authorize(p.apiKey, bodyFor(p.projectId))).statusCode, 200);
    assert.equal((await authorize(p.apiKey, { nonsense: true })).statusCode, 400);
    const res = await authorize(p.apiKey, { nonsense: true });
    assert.equal(res.statusCode, 429);
    assert.equal(res.json().code, "rate_limited");
    assert.ok(Number(res.headers["retry-after"]) >= 1);
    assert.match(String(res.headers["ratelimit-policy"]), /^2;w=60$/);
    assert.match(String(res.headers.ratelimit), /remaining=0/);
  });

  it("503 chain_not_configured without a paymaster for the chain", async () => {
    const bare = await startTestApp({ env: { CHAIN_14601_PAYMASTER_ADDRESS: "" } });
    try {
      const p = await seedProject(bare);
      const res = await bare.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: bodyFor(p.projectId),
      });
      assert.equal(res.statusCode, 503);
      assert.equal(res.json().code, "chain_not_configured");
    } finally {
      await bare.close();
    }
  });
});

describe("money under concurrency", () => {
  it("500 concurrent authorizations against a tank of exactly K reservations: K succeed, the rest 402", async () => {
    const K = 37;
    const p = await fundedProject(BigInt(K) * COST);
    const results = await Promise.all(
      Array.from({ length: 500 }, () => authorize(p.apiKey, bodyFor(p.projectId))),
    );
    const by = (s: number) => results.filter((r) => r.statusCode === s).length;
    assert.equal(by(200), K);
    assert.equal(by(402), 500 - K);
    assert.equal(await balanceOf(p.projectId), 0n);
    const parity = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funds/parity`,
      token: p.ownerToken,
    });
    assert.deepEqual(parity.json(), {
      projectId: p.projectId,
      ledgerBalance: "0",
      cachedBalance: "0",
      delta: "0",
      inSync: true,
      chains: [{ chainId: 14601, ledgerBalance: "0", cachedBalance: "0", delta: "0", inSync: true }],
    });
  });

  it("50 concurrent requests with one clientNonce: one reservation, every 200 byte-identical", async () => {
    const p = await fundedProject(100n * COST);
    const body = bodyFor(p.projectId, { clientNonce: "order-42" });
    const results = await Promise.all(Array.from({ length: 50 }, () => authorize(p.apiKey, body)));
    const oks = results.filter((r) => r.statusCode === 200);
    assert.ok(oks.length >= 1);
    assert.ok(
      results.every((r) => r.statusCode === 200 || r.statusCode === 409),
      results.map((r) => r.statusCode).join(),
    );
    assert.equal(new Set(oks.map((r) => r.body)).size, 1);
    assert.equal(await balanceOf(p.projectId), 99n * COST);
    const reserves = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE project_id = $1 AND kind = 'reserve'",
      [p.projectId],
    );
    assert.equal(reserves[0]!.n, 1);
    const later = await authorize(p.apiKey, body);
    assert.equal(later.body, oks[0]!.body);
  });

  it("the same clientNonce sent concurrently through two instances still makes one reservation", async () => {
    const p = await fundedProject(100n * COST);
    const other = await startTestApp({ db: { db: t.db, schema: null, drop: async () => {} } });
    try {
      const body = bodyFor(p.projectId, { clientNonce: "two-instances" });
      const send = (app: TestApp) =>
        app.request({ method: "POST", url: "/sponsor/authorize", token: p.apiKey, payload: body });
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => send(i % 2 === 0 ? t : other)));
      assert.ok(results.every((r) => r.statusCode === 200));
      assert.equal(new Set(results.map((r) => r.body)).size, 1);
      assert.equal(await balanceOf(p.projectId), 99n * COST);
    } finally {
      await other.close();
    }
  });

  it("the same clientNonce with a different body is 422; refusals are not stored", async () => {
    const p = await fundedProject(0n);
    const body = bodyFor(p.projectId, { clientNonce: "retry-me" });
    assert.equal((await authorize(p.apiKey, body)).statusCode, 402);
    await creditDeposit(t.db, { projectId: p.projectId, reference: "nonce-test", amountWei: 5n * COST });
    const first = await authorize(p.apiKey, body);
    assert.equal(first.statusCode, 200, "a refused attempt must not pin the nonce");
    const changed = await authorize(p.apiKey, { ...body, estimatedGas: GAS + 1 });
    assert.equal(changed.statusCode, 422);
    assert.equal(changed.json().code, "idempotency_key_reused");
    assert.equal(await balanceOf(p.projectId), 4n * COST);
  });
});

describe("idempotency window", () => {
  it("a clientNonce is remembered for 24 hours, then free again", async () => {
    const p = await fundedProject(10n * COST);
    const body = bodyFor(p.projectId, { clientNonce: "daily-reward" });
    const first = await authorize(p.apiKey, body);
    assert.equal((await authorize(p.apiKey, body)).body, first.body);
    // The replay is kept apart from the sponsorship (migration 020); age it as 25 hours passing would.
    await t.db.query(
      "UPDATE sponsorship_replays SET created_at = created_at - interval '25 hours' WHERE project_id = $1",
      [p.projectId],
    );
    const later = await authorize(p.apiKey, body);
    assert.equal(later.statusCode, 200);
    assert.notEqual(later.json().authorizationId, first.json().authorizationId);
    assert.equal(await balanceOf(p.projectId), 8n * COST);
  });
});

describe("revocation", () => {
  it("a revoked key is refused by another instance within 5 s", async () => {
    let clock = Date.now();
    const p = await fundedProject(10n * COST);
    const b = await startTestApp({ db: { db: t.db, schema: null, drop: async () => {} }, now: () => clock });
    try {
      const use = () =>
        b.request({
          method: "POST",
          url: "/sponsor/authorize",
          token: p.apiKey,
          payload: bodyFor(p.projectId),
        });
      assert.equal((await use()).statusCode, 200);
      const keys = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/apikeys`,
        token: p.ownerToken,
      });
      const del = await t.request({
        method: "DELETE",
        url: `/projects/${p.projectId}/apikeys/${keys.json()[0].id}`,
        token: p.ownerToken,
      });
      assert.equal(del.statusCode, 200);
      clock += 5_000;
      assert.equal((await use()).statusCode, 401);
    } finally {
      await b.close();
    }
  });
});

describe("project settings read per instance", () => {
  it("requests that find the cached terms and approval settings expired read each once, not once apiece", async () => {
    let clock = Date.now();
    const p = await fundedProject(100n * COST);
    const reads = { terms: 0, approval: 0 };
    // The same store, counting the two per-project reads an authorization may need, each answered
    // 50 ms late: as under load, the burst's other requests come to the setting while it is read.
    const counted = new Proxy(t.db, {
      get(target, prop, receiver) {
        if (prop !== "query") return Reflect.get(target, prop, receiver);
        return async (text: string, values?: unknown[], name?: string) => {
          const terms = text.includes("FROM projects WHERE id = $1") && text.includes("sponsor_icon");
          const approval = text.includes("FROM project_webhook_settings WHERE project_id = $1");
          if (terms) reads.terms++;
          if (approval) reads.approval++;
          const rows = await target.query(text, values, name);
          if (terms || approval) await new Promise((resolve) => setTimeout(resolve, 50));
          return rows;
        };
      },
    });
    const b = await startTestApp({
      db: { db: counted, schema: null, drop: async () => {} },
      now: () => clock,
    });
    try {
      const burst = () =>
        Promise.all(
          Array.from({ length: 30 }, () =>
            b.request({
              method: "POST",
              url: "/sponsor/authorize",
              token: p.apiKey,
              payload: bodyFor(p.projectId),
            }),
          ),
        );
      const first = await burst();
      assert.ok(first.every((r) => r.statusCode === 200));
      assert.deepEqual(reads, { terms: 1, approval: 1 }, "30 requests on a cold cache");
      // Past KEY_CACHE_TTL_MS (2 s): every request of the next burst finds both entries expired.
      clock += 2_001;
      const second = await burst();
      assert.ok(second.every((r) => r.statusCode === 200));
      assert.deepEqual(reads, { terms: 2, approval: 2 }, "30 requests on an expired cache");
      assert.equal(await balanceOf(p.projectId), 40n * COST);
    } finally {
      await b.close();
    }
  });
});
