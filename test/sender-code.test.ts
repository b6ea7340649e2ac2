/**
 * The sender's code at the HTTP edge (issue 19), with a resolver that answers what a test names:
 * how each verdict becomes an answer on both ways in, what the project's `unknownAccounts`
 * setting changes, and that a refusal reserves and counts nothing. The resolver itself meets real
 * accounts on a real chain in test/chain/account-code.test.ts, and the attacks it stops in
 * test/chain/attack-*.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Hex } from "viem";
import { IMPLEMENTATION_RULES } from "../src/accounts/code/implementations.ts";
import type { SenderCode, SenderCodeQuery, SenderCodeResolver } from "../src/accounts/code/resolve.ts";
import { decodePaymasterAndData, ZERO_HASH } from "../src/paymaster/layout.ts";
import { fundedProject, startTestApp, type TestApp } from "./support/app.ts";

const GAME = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const MINT = "0xa0712d68";
const KNOWN = "0x1000000000000000000000000000000000000001";
const UNKNOWN = "0x1000000000000000000000000000000000000002";
const MODULAR = "0x1000000000000000000000000000000000000003";
const OFFLINE = "0x1000000000000000000000000000000000000004";
const CODE_HASH: Hex = `0x${"c0de".repeat(16)}`;
const FACTORY_CALL: Hex = `0x${"fa".repeat(20)}5fbfb9cf${"00".repeat(64)}`;

const implementation = (id: string) => {
  const rule = IMPLEMENTATION_RULES.find((r) => r.implementation.id === id);
  assert.ok(rule, id);
  return rule.implementation;
};

/** What the chain would say of each test sender; every query is kept. */
const queries: SenderCodeQuery[] = [];
const resolver: SenderCodeResolver = {
  async resolve(q): Promise<SenderCode> {
    queries.push(q);
    switch (q.sender.toLowerCase()) {
      case KNOWN:
        return {
          kind: "known",
          implementation: implementation("simple-account-v0.7"),
          codeHash: q.initCode === "0x" ? CODE_HASH : ZERO_HASH,
          via: q.initCode === "0x" ? "erc1967" : "factory",
        };
      case MODULAR:
        return {
          kind: "known",
          implementation: implementation("oz-account-erc7579"),
          codeHash: CODE_HASH,
          via: "erc1167",
        };
      case OFFLINE:
        return { kind: "unavailable", detail: "the chain's RPC did not answer" };
      default:
        return { kind: "refused", code: "account_not_supported", detail: "the sender's code is not known" };
    }
  },
};

let t: TestApp;
before(async () => {
  t = await startTestApp({ senderCode: resolver });
});
after(() => t.close());

const newProject = () => fundedProject(t, { target: GAME, selector: MINT }, 10n ** 18n);

type Project = Awaited<ReturnType<typeof newProject>>;

function authorize(p: Project, user: string, extra: Record<string, unknown> = {}) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user,
      target: GAME,
      selector: MINT,
      estimatedGas: 200_000,
      chainId: 14601,
      ...extra,
    },
  });
}

async function balance(p: Project): Promise<bigint> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/balance`,
    token: p.ownerToken,
  });
  return BigInt(res.json().balance);
}

describe("POST /sponsor/authorize and the sender's code", () => {
  it("binds a known account's code hash and the ceiling on preVerificationGas, in the answer and in paymasterAndData", async () => {
    const p = await newProject();
    const res = await authorize(p, KNOWN);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.senderCodeHash, CODE_HASH);
    const decoded = decodePaymasterAndData(body.paymasterAndData);
    assert.ok(decoded && decoded.mode === "call");
    assert.equal(decoded.senderCodeHash, CODE_HASH);
    assert.equal(decoded.maxPreVerificationGas.toString(), body.maxPreVerificationGas);
    // 21,000 + 18,300 + 41 words × 516 (no initCode, 388 bytes of call, 258 of paymasterAndData, 160 of signature).
    assert.equal(body.maxPreVerificationGas, "60456");
  });

  it("passes the initCode to the resolver and binds it: a first operation's ceiling grows with it", async () => {
    const p = await newProject();
    const res = await authorize(p, KNOWN, { initCode: FACTORY_CALL });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().senderCodeHash, ZERO_HASH, "a counterfactual sender binds its initCode instead");
    assert.equal(queries.at(-1)?.initCode, FACTORY_CALL.toLowerCase());
    assert.equal(res.json().maxPreVerificationGas, String(60_456 + 3 * 516));
  });

  it("refuses an unknown account with 403 account_not_supported, reserving nothing", async () => {
    const p = await newProject();
    const before = await balance(p);
    const res = await authorize(p, UNKNOWN);
    assert.equal(res.statusCode, 403);
    assert.match(String(res.headers["content-type"]), /application\/problem\+json/);
    assert.equal(res.json().code, "account_not_supported");
    assert.match(res.json().detail, /not known/);
    assert.equal(await balance(p), before);
  });

  it("refuses a known account whose code has no execute(address,uint256,bytes): call authorizations read the call out of it", async () => {
    const p = await newProject();
    const res = await authorize(p, MODULAR);
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().code, "account_not_supported");
    assert.match(res.json().detail, /execute\(address,uint256,bytes\)/);
  });

  it("answers 503 chain_unavailable when the sender's code cannot be read, and reserves nothing", async () => {
    const p = await newProject();
    const before = await balance(p);
    const res = await authorize(p, OFFLINE);
    assert.equal(res.statusCode, 503);
    assert.equal(res.json().code, "chain_unavailable");
    assert.equal(await balance(p), before);
  });

  it("the refusals that need no chain come first: not allowlisted is 403 not_allowlisted, an empty tank 402, whatever the code", async () => {
    const p = await newProject();
    const other = await authorize(p, UNKNOWN, { selector: "0xdeadbeef" });
    assert.deepEqual([other.statusCode, other.json().code], [403, "not_allowlisted"]);
    const offline = await authorize(p, OFFLINE, { selector: "0xdeadbeef" });
    assert.deepEqual([offline.statusCode, offline.json().code], [403, "not_allowlisted"]);
    const empty = await fundedProject(t, { target: GAME, selector: MINT }, 0n);
    for (const user of [UNKNOWN, OFFLINE]) {
      const res = await authorize(empty, user);
      assert.deepEqual([res.statusCode, res.json().code], [402, "insufficient_balance"], user);
    }
  });

  it("POST /sponsor/check says what authorize would: account_not_supported", async () => {
    const p = await newProject();
    const res = await t.request({
      method: "POST",
      url: "/sponsor/check",
      token: p.apiKey,
      payload: {
        projectId: p.projectId,
        user: UNKNOWN,
        target: GAME,
        selector: MINT,
        estimatedGas: 200_000,
        chainId: 14601,
      },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual([res.json().wouldSponsor, res.json().code], [false, "account_not_supported"]);
  });

  it("a malformed initCode is a 400 and never reaches the resolver", async () => {
    const p = await newProject();
    const seen = queries.length;
    for (const initCode of ["0x1", "0xzz", "c0ffee", `0x${"00".repeat(24_577)}`]) {
      const res = await authorize(p, KNOWN, { initCode });
      assert.equal(res.statusCode, 400, initCode.slice(0, 12));
      assert.equal(res.json().code, "invalid_request");
    }
    assert.equal(queries.length, seen);
  });
});

describe("the project's unknownAccounts setting", () => {
  it("is refuse by default, shown on the project, and only refuse or caps_only", async () => {
    const p = await newProject();
    const got = await t.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.ownerToken });
    assert.equal(got.json().unknown_accounts, "refuse");
    for (const bad of ["any", "", null, true]) {
      const res = await t.request({
        method: "PATCH",
        url: `/projects/${p.projectId}`,
        token: p.ownerToken,
        payload: { unknownAccounts: bad },
      });
      assert.equal(res.statusCode, 400, String(bad));
    }
  });

  it("caps_only sponsors an unknown account with no code bound; a known one stays bound", async () => {
    const p = await newProject();
    const patched = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { unknownAccounts: "caps_only" },
    });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.equal(patched.json().unknown_accounts, "caps_only");
    // The setting is cached per instance for KEY_CACHE_TTL_MS; a fresh project has no entry yet.
    const unknown = await authorize(p, UNKNOWN);
    assert.equal(unknown.statusCode, 200, unknown.body);
    assert.equal(unknown.json().senderCodeHash, ZERO_HASH);
    const known = await authorize(p, KNOWN);
    assert.equal(known.json().senderCodeHash, CODE_HASH);
  });

  it("only an admin or owner changes it: a sponsor key cannot", async () => {
    const p = await newProject();
    const res = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.apiKey,
      payload: { unknownAccounts: "caps_only" },
    });
    assert.ok(res.statusCode === 401 || res.statusCode === 403, String(res.statusCode));
    const got = await t.request({ method: "GET", url: `/projects/${p.projectId}`, token: p.ownerToken });
    assert.equal(got.json().unknown_accounts, "refuse");
  });
});
