/**
 * Two real chains at once (two anvil nodes, chain ids 14601 and 31337, currencies S and LOC),
 * each with its own deposit watcher (issue 23): a transfer credits the tank of the chain it was
 * made on and no other, an authorization on a chain whose tank is empty is 402 however full the
 * other tank is, and a reorganisation on one chain takes back only that chain's credit.
 * Parity holds per chain throughout.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, parseEther } from "viem";
import { type DepositWatcher, depositWatcher } from "../../src/funding/deposit-watcher.ts";
import {
  authorizeMint,
  MINT_SELECTOR,
  MINT_TARGET,
  seedProject,
  startTestApp,
  type TestApp,
} from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { watcherClient } from "../support/chain-service.ts";

const CONFIRMATIONS = 2;
const HOME = 14601;
const OTHER = 31337;

let home: DevChain;
let other: DevChain;
let t: TestApp;

before(async () => {
  [home, other] = await Promise.all([startChain({ chainId: HOME }), startChain({ chainId: OTHER })]);
  t = await startTestApp({
    env: {
      CHAINS: `${HOME},${OTHER}`,
      CHAIN_14601_RPC_URL: home.rpcUrl,
      CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_31337_NAME: "Local",
      CHAIN_31337_RPC_URL: other.rpcUrl,
      CHAIN_31337_CURRENCY_SYMBOL: "LOC",
      CHAIN_31337_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_31337_PAYMASTER_ADDRESS: `0x${"bb".repeat(20)}`,
    },
  });
});

after(async () => {
  await t?.close();
  await Promise.all([home?.stop(), other?.stop()]);
});

function watcherOf(chain: DevChain): DepositWatcher {
  return depositWatcher({
    db: t.db,
    client: watcherClient(chain),
    chainId: chain.chainId,
    confirmations: CONFIRMATIONS,
    startBlock: 0n,
  });
}

async function pay(chain: DevChain, to: string, valueWei: bigint) {
  const hash = await chain.wallets[2]!.sendTransaction({ to: to as Address, value: valueWei });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  await chain.testClient.mine({ blocks: CONFIRMATIONS });
  return receipt;
}

async function tanks(projectId: string): Promise<Record<number, bigint>> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${projectId}/balance`,
    token: await t.token("owner@example.com"),
  });
  assert.equal(res.statusCode, 200, res.body);
  const chains = res.json().chains as { chainId: number; balance: string; currency: string }[];
  return Object.fromEntries(chains.map((c) => [c.chainId, BigInt(c.balance)]));
}

async function parityByChain(projectId: string) {
  const res = await t.request({
    method: "GET",
    url: `/projects/${projectId}/funds/parity`,
    token: await t.token("owner@example.com"),
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json().chains as { chainId: number; inSync: boolean }[]).map((c) => [c.chainId, c.inSync]);
}

/** The same player each time. */
const authorize = (p: { projectId: string; apiKey: string }, chainId: number) =>
  authorizeMint(t, p, `0x${"ab".repeat(20)}`, chainId);

describe("two chains, two tanks", () => {
  test("a transfer credits the chain it was made on; an empty tank on the other chain is 402", async () => {
    const p = await seedProject(t);
    const allow = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/allowlist`,
      token: p.ownerToken,
      // Every chain: the same game contract address on both local chains.
      payload: { targetContract: MINT_TARGET, functionSelector: MINT_SELECTOR, chainId: null },
    });
    assert.equal(allow.statusCode, 201, allow.body);
    const account = await t.request({
      method: "GET",
      url: `/projects/${p.projectId}/funding-accounts/${OTHER}`,
      token: p.ownerToken,
    });
    assert.equal(account.statusCode, 200, account.body);
    const otherAddress = account.json().address as string;
    const homeWatcher = watcherOf(home);
    const otherWatcher = watcherOf(other);

    // 2 S on the home chain, to the home address and (made on the home chain) to the other
    // chain's address: both are credited to the home tank, never to the other chain's.
    await pay(home, p.depositAddress, parseEther("2"));
    await pay(home, otherAddress, parseEther("0.25"));
    assert.equal((await homeWatcher.tick()).credited, 1 + (otherAddress === p.depositAddress ? 1 : 0));
    assert.equal((await otherWatcher.tick()).credited, 0);
    const afterHome = await tanks(p.projectId);
    assert.equal(afterHome[OTHER], 0n);
    assert.ok(afterHome[HOME]! >= parseEther("2"));

    const refused = await authorize(p, OTHER);
    assert.equal(refused.statusCode, 402, refused.body);
    assert.equal(refused.json().code, "insufficient_balance");
    assert.equal((await authorize(p, HOME)).statusCode, 200);

    // 1 LOC on the other chain: its own tank, the home tank untouched.
    const before = await tanks(p.projectId);
    const credited = await pay(other, otherAddress, parseEther("1"));
    assert.equal((await otherWatcher.tick()).credited, 1);
    assert.equal((await homeWatcher.tick()).credited, 0);
    const after = await tanks(p.projectId);
    assert.deepEqual(after, { [HOME]: before[HOME]!, [OTHER]: parseEther("1") });
    const granted = await authorize(p, OTHER);
    assert.equal(granted.statusCode, 200, granted.body);
    const spent = await tanks(p.projectId);
    assert.equal(spent[HOME], before[HOME]);
    assert.ok(spent[OTHER]! < parseEther("1"));
    assert.deepEqual(await parityByChain(p.projectId), [
      [HOME, true],
      [OTHER, true],
    ]);

    // The other chain reorganises its deposit away: only the other chain's credit goes back.
    const depth = (await other.publicClient.getBlockNumber()) - credited.blockNumber + 1n;
    await reorganise(other, Number(depth));
    const report = await otherWatcher.tick();
    assert.equal(report.reorg?.reversedWei, spent[OTHER]);
    const reversed = await tanks(p.projectId);
    assert.deepEqual(reversed, { [HOME]: before[HOME]!, [OTHER]: 0n });
    assert.equal((await homeWatcher.tick()).reorg ?? null, null);
    assert.deepEqual(await parityByChain(p.projectId), [
      [HOME, true],
      [OTHER, true],
    ]);
  });
});

/** Replaces the chain's last `depth` blocks with as many empty ones (anvil's reorg). */
async function reorganise(chain: DevChain, depth: number) {
  await chain.testClient.request({ method: "anvil_reorg" as never, params: [depth, []] as never });
}
