/**
 * Contract ABIs (issue 24): a studio uploads a contract's ABI and every place that shows a
 * selector can name the function; only selectors and signatures are kept.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { erc20Abi } from "viem";
import { fundedProject, MINT_SELECTOR, MINT_TARGET, startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
let p: Awaited<ReturnType<typeof fundedProject>>;
let other: Awaited<ReturnType<typeof fundedProject>>;

before(async () => {
  t = await startTestApp();
  p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 18n);
  other = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 18n, {
    email: "other@example.com",
  });
});
after(() => t.close());

const GAME_ABI = [
  { type: "constructor", inputs: [] },
  { type: "function", name: "mint", inputs: [{ name: "id", type: "uint256" }], outputs: [] },
  { type: "event", name: "Minted", inputs: [{ name: "id", type: "uint256", indexed: true }] },
];

const call = (method: "GET" | "PUT" | "DELETE", url: string, payload?: object, token = p.ownerToken) =>
  t.request({ method, url, token, ...(payload ? { payload } : {}) });

describe("contract ABIs", () => {
  test("an upload names the contract and its functions, is listed, replaced and removed", async () => {
    const put = await call("PUT", `/projects/${p.projectId}/contracts/${MINT_TARGET}`, {
      name: "Game items",
      abi: GAME_ABI,
    });
    assert.equal(put.statusCode, 201, put.body);
    assert.deepEqual((put.json() as { functions: unknown }).functions, [
      { selector: MINT_SELECTOR, signature: "mint(uint256)" },
    ]);
    const token = "0x1c7d4b196cb0c7b01d743fbc6116a902379c7238";
    const erc20 = await call("PUT", `/projects/${p.projectId}/contracts/${token}`, {
      abi: erc20Abi as unknown as object[],
    });
    assert.equal(erc20.statusCode, 201, erc20.body);
    const list = (await call("GET", `/projects/${p.projectId}/contracts`)).json() as {
      address: string;
      name: string | null;
      functions: { signature: string }[];
    }[];
    assert.deepEqual(
      list.map((c) => [c.address, c.name, c.functions.length]),
      [
        [token, null, 9],
        [MINT_TARGET, "Game items", 1],
      ].sort(),
    );
    // A checksummed address is the same contract; a second upload replaces the first.
    const again = await call(
      "PUT",
      `/projects/${p.projectId}/contracts/0x5FbDB2315678afecb367f032d93F642f64180aa3`,
      {
        name: "Game items v2",
        abi: [...GAME_ABI, { type: "function", name: "burn", inputs: [{ type: "uint256" }] }],
      },
    );
    assert.equal(again.statusCode, 200, again.body);
    assert.deepEqual(
      (again.json() as { functions: { signature: string }[] }).functions.map((f) => f.signature),
      ["mint(uint256)", "burn(uint256)"],
    );
    assert.equal((await call("DELETE", `/projects/${p.projectId}/contracts/${token}`)).statusCode, 200);
    assert.equal((await call("DELETE", `/projects/${p.projectId}/contracts/${token}`)).statusCode, 404);
    assert.equal(((await call("GET", `/projects/${p.projectId}/contracts`)).json() as unknown[]).length, 1);
    // The allowlist is not touched by names.
    const allow = (
      await t.request({ method: "GET", url: `/projects/${p.projectId}/allowlist`, token: p.ownerToken })
    ).json();
    assert.equal((allow as unknown[]).length, 1);
  });

  test("what is not an ABI is refused with invalid_abi and changes nothing; another tenant sees nothing", async () => {
    const url = `/projects/${p.projectId}/contracts/${MINT_TARGET}`;
    const cases: [unknown, number, string][] = [
      [{ abi: [] }, 400, "invalid_abi"],
      [{ abi: [{ type: "function", name: "x", inputs: [{ type: "uint7" }] }] }, 400, "invalid_abi"],
      [{ abi: [{ type: "event", name: "E", inputs: [] }] }, 400, "invalid_abi"],
      [{ abi: "[]" }, 400, "invalid_request"],
      [{ abi: GAME_ABI, name: "a\nb" }, 400, "invalid_request"],
      [{ abi: GAME_ABI, extra: 1 }, 400, "invalid_request"],
      [{ abi: Array.from({ length: 2001 }, () => GAME_ABI[1]) }, 400, "invalid_request"],
    ];
    for (const [body, status, code] of cases) {
      const res = await call("PUT", url, body as object);
      assert.equal(res.statusCode, status, `${JSON.stringify(body).slice(0, 80)}: ${res.body}`);
      assert.equal((res.json() as { code: string }).code, code);
    }
    const bad = await call("PUT", `/projects/${p.projectId}/contracts/0x1234`, { abi: GAME_ABI });
    assert.equal(bad.statusCode, 400);
    const names = (await call("GET", `/projects/${p.projectId}/contracts`)).json() as { name: string }[];
    assert.deepEqual(
      names.map((c) => c.name),
      ["Game items v2"],
    );
    const stranger = await call("GET", `/projects/${p.projectId}/contracts`, undefined, other.ownerToken);
    assert.equal(stranger.statusCode, 404);
    const theirs = (
      await call("GET", `/projects/${other.projectId}/contracts`, undefined, other.ownerToken)
    ).json();
    assert.deepEqual(theirs, []);
    const byKey = await call("PUT", url, { abi: GAME_ABI }, p.apiKey);
    assert.equal(byKey.statusCode, 403, "a sponsor key cannot change names");
  });
});
