import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { type Address, type Hex, hashTypedData, hexToBigInt, hexToNumber, recoverAddress, slice } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { sponsorshipDigest } from "../src/sponsor/paymaster-data.ts";
import { seedProject, startTestApp, TEST_PAYMASTER, TEST_SIGNER_KEY, type TestApp } from "./support/app.ts";

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const MINT = "0xa0712d68";
const USER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const FEE_CAP_WEI = 200_000_000_000n;
const GAS = 150_000;
const COST = BigInt(GAS) * FEE_CAP_WEI;

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

async function fundedProject(balanceWei: bigint, opts: Parameters<typeof seedProject>[1] = {}) {
  const p = await seedProject(t, opts);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: GAME, functionSelector: MINT },
  });
  assert.equal(allow.statusCode, 201);
  if (balanceWei > 0n) {
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `test:${randomBytes(8).toString("hex")}`,
      amountWei: balanceWei,
    });
  }
  return p;
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
  it("signs exactly what the paymaster verifies and reserves maxGasCost", async () => {
    const p = await fundedProject(10n * COST);
    const res = await authorize(p.apiKey, bodyFor(p.projectId));
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.authorized, true);
    assert.equal(body.maxGasCost, COST.toString());
    assert.equal(body.validUntil - body.validAfter, 300);
    assert.equal(body.paymaster.toLowerCase(), TEST_PAYMASTER);
    const pmd = body.paymasterAndData as Hex;
    // paymaster(20) | verificationGas(16) | postOpGas(16) | maxGasCost(16) | validUntil(6) | validAfter(6) | authId(32) | sig(65)
    assert.equal((pmd.length - 2) / 2, 20 + 16 + 16 + 16 + 6 + 6 + 32 + 65);
    assert.equal(slice(pmd, 0, 20).toLowerCase(), TEST_PAYMASTER);
    assert.equal(hexToBigInt(slice(pmd, 20, 36)).toString(), body.paymasterVerificationGasLimit);
    assert.equal(hexToBigInt(slice(pmd, 36, 52)).toString(), body.paymasterPostOpGasLimit);
    assert.equal(hexToBigInt(slice(pmd, 52, 68)), COST);
    assert.equal(hexToNumber(slice(pmd, 68, 74)), body.validUntil);
    assert.equal(hexToNumber(slice(pmd, 74, 80)), body.validAfter);
    assert.equal(slice(pmd, 80, 112), body.authorizationId);
    assert.equal(slice(pmd, 112), body.signature);
    assert.equal(`0x${pmd.slice(2 + 52 * 2)}`, body.paymasterData);
    const digest = sponsorshipDigest(
      { chainId: 14601, paymaster: TEST_PAYMASTER },
      {
        sender: USER.toLowerCase() as Address,
        target: GAME.toLowerCase() as Address,
        selector: MINT,
        maxGasCostWei: COST,
        validUntilSec: body.validUntil,
        validAfterSec: body.validAfter,
        authId: body.authorizationId,
      },
    );
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

  it("pins the EIP-712 digest for fixed inputs (known answer, checked against viem's hashTypedData)", () => {
    const fixed = {
      sender: "0x1111111111111111111111111111111111111111" as Address,
      target: "0x2222222222222222222222222222222222222222" as Address,
      selector: "0xa0712d68" as Hex,
      maxGasCostWei: 30_000_000_000_000_000n,
      validUntilSec: 1_800_000_300,
      validAfterSec: 1_800_000_000,
      authId: `0x${"ab".repeat(32)}` as Hex,
    };
    const paymaster = "0x3333333333333333333333333333333333333333" as Address;
    const independent = hashTypedData({
      domain: { name: "SponsorPaymaster", version: "1", chainId: 14601, verifyingContract: paymaster },
      types: {
        Sponsorship: [
          { name: "sender", type: "address" },
          { name: "target", type: "address" },
          { name: "selector", type: "bytes4" },
          { name: "maxGasCost", type: "uint256" },
          { name: "validUntil", type: "uint48" },
          { name: "validAfter", type: "uint48" },
          { name: "authId", type: "bytes32" },
        ],
      },
      primaryType: "Sponsorship",
      message: {
        sender: fixed.sender,
        target: fixed.target,
        selector: fixed.selector,
        maxGasCost: fixed.maxGasCostWei,
        validUntil: fixed.validUntilSec,
        validAfter: fixed.validAfterSec,
        authId: fixed.authId,
      },
    });
    const ours = sponsorshipDigest({ chainId: 14601, paymaster }, fixed);
    assert.equal(ours, independent);
    assert.equal(ours, KNOWN_DIGEST);
  });
});

// Computed once from the inputs above; any change to the typed data changes it.
const KNOWN_DIGEST = "0x48dc73cd76273012ac65fc4484e267873d390ae1006067cd43571fd10f448a4f";

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
    await t.db.query(
      "UPDATE sponsorships SET created_at = created_at - interval '25 hours' WHERE project_id = $1",
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
