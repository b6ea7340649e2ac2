/**
 * The ERC-7677 endpoint without a chain: JSON-RPC in, JSON-RPC out. Every malformed,
 * unauthorized or refused request is a JSON-RPC error (HTTP 200) with a stable `data.code`,
 * never a 500, and changes nothing; the stub reserves nothing; the final answer reserves once
 * per operation and replays byte for byte; an API key in the URL works and is never logged.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { encodeFunctionData, type Hex, numberToHex, parseAbi } from "viem";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { PAYMASTER_GAS_LIMITS } from "../src/paymaster/gas.ts";
import { decodePaymasterAndData } from "../src/paymaster/layout.ts";
import { seedProject, startTestApp, TEST_PAYMASTER, type TestApp } from "./support/app.ts";

const ENTRY_POINT = "0x0000000071727de22e5e9d8baf0edac6f37da032";
const GAME = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const OTHER = "0x1111111111111111111111111111111111111111";
const SENDER = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
const game = parseAbi(["function mint(uint256 itemId)"]);
const account = parseAbi([
  "function execute(address dest, uint256 value, bytes func)",
  "function executeBatch(address[] dest, uint256[] value, bytes[] func)",
]);
const mint = encodeFunctionData({ abi: game, functionName: "mint", args: [7n] });
const MINT = mint.slice(0, 10);

let t: TestApp;
let p: Awaited<ReturnType<typeof seedProject>>;

before(async () => {
  t = await startTestApp();
  p = await seedProject(t);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: GAME, functionSelector: MINT },
  });
  assert.equal(allow.statusCode, 201);
  await creditDeposit(t.db, { projectId: p.projectId, reference: "rpc:tank", amountWei: 10n ** 18n });
});
after(() => t.close());

function userOp(over: Record<string, unknown> = {}) {
  return {
    sender: SENDER,
    nonce: "0x0",
    callData: encodeFunctionData({ abi: account, functionName: "execute", args: [GAME, 0n, mint] }),
    callGasLimit: numberToHex(80_000),
    verificationGasLimit: numberToHex(60_000),
    preVerificationGas: numberToHex(50_000),
    maxFeePerGas: numberToHex(2_000_000_000),
    maxPriorityFeePerGas: numberToHex(1_000_000_000),
    signature: "0x",
    ...over,
  };
}

async function rpc(
  method: string,
  params: unknown[],
  opts: { key?: string | null; url?: string; raw?: string } = {},
) {
  const key = opts.key === undefined ? p.apiKey : opts.key;
  const res = await t.app.inject({
    method: "POST",
    url: opts.url ?? "/rpc",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    payload: opts.raw ?? JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  assert.equal(res.statusCode, 200, `HTTP ${res.statusCode}: ${res.body}`);
  assert.match(String(res.headers["content-type"]), /application\/json/);
  return { body: res.json(), text: res.body };
}

async function ledgerState() {
  const [row] = await t.db.query<{ n: number; balance: string }>(
    `SELECT (SELECT count(*)::int FROM sponsorships WHERE project_id = $1) AS n,
       (SELECT gas_tank_balance::text FROM projects WHERE id = $1) AS balance`,
    [p.projectId],
  );
  return row!;
}

const params = (op = userOp(), chain = "0x3909") => [op, ENTRY_POINT, chain, {}];

describe("ERC-7677 at POST /rpc", () => {
  it("pm_getPaymasterStubData answers a stub of the final length and reserves nothing", async () => {
    const before = await ledgerState();
    const { body } = await rpc("pm_getPaymasterStubData", params(userOp({ callGasLimit: "0x0" })));
    assert.equal(body.result.isFinal, false);
    assert.equal(body.result.paymaster.toLowerCase(), TEST_PAYMASTER);
    assert.equal(
      BigInt(body.result.paymasterVerificationGasLimit),
      PAYMASTER_GAS_LIMITS.verificationGasLimit,
    );
    assert.equal(BigInt(body.result.paymasterPostOpGasLimit), PAYMASTER_GAS_LIMITS.postOpGasLimit);
    assert.equal(body.result.sponsor.name, "Test project");
    const stub = decodePaymasterAndData(
      `${TEST_PAYMASTER}${"00".repeat(32)}${body.result.paymasterData.slice(2)}` as Hex,
    );
    assert.equal(stub?.mode, "operation");
    assert.deepEqual(await ledgerState(), before);
  });

  it("pm_getPaymasterData reserves the operation's own maximum cost, once, and replays byte for byte", async () => {
    const before = await ledgerState();
    const op = userOp({ nonce: "0x1" });
    const first = await rpc("pm_getPaymasterData", params(op));
    assert.ok(first.body.result.paymasterData, first.text);
    // The stub has the final data's length and no more zero bytes, so simulating with it costs
    // what the real data will (calldata gas) and runs the same checks.
    const stub = await rpc("pm_getPaymasterStubData", params(op));
    const zeros = (hex: string) => (hex.slice(2).match(/../g) ?? []).filter((b) => b === "00").length;
    assert.equal(stub.body.result.paymasterData.length, first.body.result.paymasterData.length);
    assert.ok(zeros(stub.body.result.paymasterData) <= zeros(first.body.result.paymasterData));
    const again = await rpc("pm_getPaymasterData", params(op));
    assert.equal(again.text, first.text);
    const after = await ledgerState();
    assert.equal(after.n, before.n + 1);
    const maxCost =
      (80_000n + 60_000n + 50_000n + PAYMASTER_GAS_LIMITS.verificationGasLimit) * 2_000_000_000n;
    assert.equal(BigInt(before.balance) - BigInt(after.balance), maxCost);
  });

  it("refuses a batch with one call off the allowlist, naming the call, at the stub and the final call", async () => {
    const callData = encodeFunctionData({
      abi: account,
      functionName: "executeBatch",
      args: [
        [GAME, OTHER],
        [0n, 0n],
        [mint, mint],
      ],
    });
    const before = await ledgerState();
    for (const method of ["pm_getPaymasterStubData", "pm_getPaymasterData"]) {
      const { body } = await rpc(method, params(userOp({ callData, nonce: "0x2" })));
      assert.equal(body.error.data.code, "not_allowlisted", JSON.stringify(body));
      assert.equal(body.error.data.callIndex, 1);
      assert.match(body.error.message, /call 1/);
    }
    assert.deepEqual(await ledgerState(), before);
  });

  it("an API key in the URL works and never reaches a log line", async () => {
    const { body } = await rpc("pm_getPaymasterStubData", params(), {
      key: null,
      url: `/rpc?apikey=${p.apiKey}`,
    });
    assert.equal(body.result.isFinal, false, JSON.stringify(body));
    assert.ok(!t.logs.some((line) => line.includes(p.apiKey)), "the key appeared in a log line");
    assert.ok(!t.logs.some((line) => line.includes(p.apiKey.slice(4, 20))));
  });

  it("the stub names the sponsor from the project's settings (name and icon)", async () => {
    const icon = "data:image/png;base64,iVBORw0KGgo=";
    const patch = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { sponsorIcon: icon },
    });
    assert.equal(patch.statusCode, 200, patch.body);
    assert.equal(patch.json().sponsor_icon, icon);
    const bad = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { sponsorIcon: "javascript:alert(1)" },
    });
    assert.equal(bad.statusCode, 400);
    const { body } = await rpc("pm_getPaymasterStubData", params());
    assert.deepEqual(body.result.sponsor, { name: "Test project", icon });
  });

  it("answers CORS preflight on /rpc", async () => {
    const res = await t.app.inject({ method: "OPTIONS", url: "/rpc" });
    assert.equal(res.statusCode, 204);
    assert.equal(res.headers["access-control-allow-origin"], "*");
  });
});

describe("ERC-7677: every bad request is a JSON-RPC error, never a 500, and changes nothing", () => {
  const cases: [
    string,
    () => Promise<{ body: { error?: { code: number; data: { code: string } } } }>,
    number,
    string,
  ][] = [
    ["malformed JSON", () => rpc("", [], { raw: "{not json" }), -32700, "malformed_json"],
    [
      "a batch request",
      () =>
        rpc("", [], {
          raw: JSON.stringify([
            { jsonrpc: "2.0", id: 1, method: "pm_getPaymasterStubData", params: params() },
          ]),
        }),
      -32600,
      "batch_not_supported",
    ],
    [
      "not JSON-RPC 2.0",
      () => rpc("", [], { raw: JSON.stringify({ id: 1, method: "pm_getPaymasterStubData" }) }),
      -32600,
      "invalid_request",
    ],
    ["an unknown method", () => rpc("eth_chainId", []), -32601, "method_not_found"],
    [
      "params not an array",
      () =>
        rpc("", [], {
          raw: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "pm_getPaymasterData", params: {} }),
        }),
      -32600,
      "invalid_request",
    ],
    ["too few params", () => rpc("pm_getPaymasterData", [userOp()]), -32602, "invalid_params"],
    [
      "a bad sender",
      () => rpc("pm_getPaymasterData", params(userOp({ sender: "0x123" }))),
      -32602,
      "invalid_params",
    ],
    [
      "a gas field out of range",
      () => rpc("pm_getPaymasterData", params(userOp({ callGasLimit: `0x1${"0".repeat(40)}` }))),
      -32602,
      "invalid_params",
    ],
    [
      "a quantity with leading zeros",
      () => rpc("pm_getPaymasterData", params(userOp({ nonce: "0x01" }))),
      -32602,
      "invalid_params",
    ],
    [
      "oversized callData",
      () => rpc("pm_getPaymasterData", params(userOp({ callData: `0x${"ab".repeat(40_000)}` }))),
      -32602,
      "invalid_params",
    ],
    [
      "a body over the limit",
      () =>
        rpc("", [], {
          raw: JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "pm_getPaymasterData",
            params: [userOp({ callData: `0x${"ab".repeat(60_000)}` })],
          }),
        }),
      -32600,
      "payload_too_large",
    ],
    [
      "the wrong chain",
      () => rpc("pm_getPaymasterData", params(userOp(), "0x1")),
      -32602,
      "unsupported_chain",
    ],
    [
      "an unknown entry point",
      () => rpc("pm_getPaymasterData", [userOp(), OTHER, "0x3909", {}]),
      -32602,
      "unsupported_entry_point",
    ],
    [
      "an unknown account encoding",
      () => rpc("pm_getPaymasterData", params(userOp({ callData: "0xdeadbeef" }))),
      -32000,
      "unsupported_account",
    ],
    [
      "an EIP-7702 operation on EntryPoint v0.7",
      () => rpc("pm_getPaymasterData", params(userOp({ factory: "0x7702", factoryData: "0x" }))),
      -32602,
      "invalid_params",
    ],
    [
      "a changed paymaster gas limit",
      () => rpc("pm_getPaymasterData", params(userOp({ paymasterVerificationGasLimit: "0x1" }))),
      -32602,
      "invalid_params",
    ],
    [
      "fees far above the market",
      () => rpc("pm_getPaymasterData", params(userOp({ maxFeePerGas: numberToHex(100_000_000_000) }))),
      -32000,
      "fee_above_ceiling",
    ],
    ["no API key", () => rpc("pm_getPaymasterData", params(), { key: null }), -32001, "unauthorized"],
    [
      "an unknown API key",
      () => rpc("pm_getPaymasterData", params(), { key: `gsk_${randomBytes(24).toString("hex")}` }),
      -32001,
      "unauthorized",
    ],
    [
      "another project in the context",
      () => rpc("pm_getPaymasterData", [userOp(), ENTRY_POINT, "0x3909", { projectId: "someone-else" }]),
      -32001,
      "unauthorized",
    ],
  ];
  for (const [what, call, code, dataCode] of cases) {
    it(`${what} → ${code} ${dataCode}`, async () => {
      const before = await ledgerState();
      const { body } = await call();
      assert.equal(body.error?.code, code, JSON.stringify(body));
      assert.equal(body.error?.data.code, dataCode);
      assert.deepEqual(await ledgerState(), before);
    });
  }

  it("a developer token is refused: the paymaster service takes a project's key", async () => {
    const { body } = await rpc("pm_getPaymasterData", params(), { key: p.ownerToken });
    assert.equal(body.error.data.code, "unauthorized");
  });
});
