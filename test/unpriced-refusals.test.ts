/**
 * With the chain's RPC down there is no fee reading, so nothing can be priced and a sponsorable
 * request answers 503 fee_oracle_stale, which clients retry. A request that would be refused at
 * any price must not be masked by it: a call that is not allowlisted stays 403 not_allowlisted,
 * a blocked sender stays 403 sender_blocked with its rule, a malformed body stays 400 — on
 * /sponsor/authorize, /sponsor/check and both ERC-7677 methods. The RPC here is really down: the
 * service's fee oracle reads a port where nothing listens.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { encodeFunctionData, numberToHex, parseAbi } from "viem";
import { fundedProject, type seedProject, startTestApp, type TestApp } from "./support/app.ts";

const GAME = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const OTHER = "0x00000000000000000000000000000000000000b0";
const MINT = "0xa0712d68";
const BLOCKED = "0x0000000000000000000000000000000000001009";
const PLAYER = "0x0000000000000000000000000000000000001001";
const ENTRY_POINT = "0x0000000071727de22e5e9d8baf0edac6f37da032";

let t: TestApp;
let p: Awaited<ReturnType<typeof seedProject>>;

before(async () => {
  // The test app's chain RPC is http://127.0.0.1:9: nothing answers there.
  t = await startTestApp({ feeOracle: "chain" });
  p = await fundedProject(t, { target: GAME, selector: MINT }, 10n ** 20n);
  const rule = await t.request({
    method: "PUT",
    url: `/projects/${p.projectId}/policies/banned`,
    token: p.ownerToken,
    payload: { kind: "sender_blocklist", senders: [BLOCKED] },
  });
  assert.ok([200, 201].includes(rule.statusCode), rule.body);
});
after(() => t.close());

const body = (user: string, target: string) => ({
  projectId: p.projectId,
  user,
  target,
  selector: MINT,
  estimatedGas: 200_000,
  chainId: 14601,
});

async function rest(path: "/sponsor/authorize" | "/sponsor/check", payload: object) {
  return t.request({ method: "POST", url: path, token: p.apiKey, payload });
}

describe("with the chain's RPC down", () => {
  it("the fee oracle has no reading (the premise)", () => {
    assert.equal(t.services.feeOracle.current(14601).kind === "fresh", false);
  });

  it("authorize: not allowlisted 403, blocked sender 403 with its rule, bad body 400; only the rest 503", async () => {
    const notAllowed = await rest("/sponsor/authorize", body(PLAYER, OTHER));
    assert.equal(notAllowed.statusCode, 403, notAllowed.body);
    assert.equal(notAllowed.json().code, "not_allowlisted");
    const blocked = await rest("/sponsor/authorize", body(BLOCKED, GAME));
    assert.equal(blocked.statusCode, 403, blocked.body);
    assert.deepEqual([blocked.json().code, blocked.json().ruleId], ["sender_blocked", "banned"]);
    const malformed = await rest("/sponsor/authorize", { ...body(PLAYER, GAME), estimatedGas: -1 });
    assert.equal(malformed.statusCode, 400);
    const stale = await rest("/sponsor/authorize", body(PLAYER, GAME));
    assert.equal(stale.statusCode, 503, stale.body);
    assert.equal(stale.json().code, "fee_oracle_stale");
  });

  it("check answers the same codes", async () => {
    const answers = await Promise.all(
      [body(PLAYER, OTHER), body(BLOCKED, GAME), body(PLAYER, GAME)].map(async (b) => {
        const res = await rest("/sponsor/check", b);
        assert.equal(res.statusCode, 200, res.body);
        return [res.json().code, res.json().ruleId];
      }),
    );
    assert.deepEqual(answers, [
      ["not_allowlisted", null],
      ["sender_blocked", "banned"],
      ["fee_oracle_stale", null],
    ]);
  });

  it("ERC-7677, stub and final: the same codes in the JSON-RPC error data", async () => {
    const account = parseAbi(["function execute(address dest, uint256 value, bytes func)"]);
    const game = parseAbi(["function mint(uint256 itemId)"]);
    const op = (sender: string, target: string) => ({
      sender,
      nonce: "0x0",
      callData: encodeFunctionData({
        abi: account,
        functionName: "execute",
        args: [
          target as `0x${string}`,
          0n,
          encodeFunctionData({ abi: game, functionName: "mint", args: [7n] }),
        ],
      }),
      callGasLimit: numberToHex(80_000),
      verificationGasLimit: numberToHex(60_000),
      preVerificationGas: numberToHex(50_000),
      maxFeePerGas: numberToHex(2_000_000_000),
      maxPriorityFeePerGas: numberToHex(1_000_000_000),
      signature: "0x",
    });
    for (const method of ["pm_getPaymasterStubData", "pm_getPaymasterData"]) {
      const codes = [];
      for (const [sender, target] of [
        [PLAYER, OTHER],
        [BLOCKED, GAME],
        [PLAYER, GAME],
      ] as const) {
        const res = await t.app.inject({
          method: "POST",
          url: "/rpc",
          headers: { "content-type": "application/json", authorization: `Bearer ${p.apiKey}` },
          payload: { jsonrpc: "2.0", id: 1, method, params: [op(sender, target), ENTRY_POINT, "0x3909", {}] },
        });
        codes.push(res.json().error?.data?.code);
      }
      assert.deepEqual(codes, ["not_allowlisted", "sender_blocked", "fee_oracle_stale"], method);
    }
  });

  it("nothing was reserved", async () => {
    const rows = await t.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1",
      [p.projectId],
    );
    assert.equal(rows[0]!.n, 0);
  });
});
