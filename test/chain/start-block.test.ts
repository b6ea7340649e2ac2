/**
 * A watcher without a cursor or a configured start block must still see what happened on chain
 * before its first tick (a deposit sent while the RPC was unreachable at first boot).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Address } from "viem";
import { createChainClient } from "../../src/chains/rpc.ts";
import { lastBlockAtOrBefore } from "../../src/chains/start-block.ts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { seedProject, startTestApp, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";

let chain: DevChain;
let t: TestApp;

before(async () => {
  chain = await startChain();
  t = await startTestApp({ env: { CHAIN_14601_RPC_URL: chain.rpcUrl } });
});
after(async () => {
  await t?.close();
  await chain?.stop();
});

describe("first start without a cursor", () => {
  test("finds the last block at or before a time by binary search", async () => {
    const client = createChainClient(chain.rpcUrl);
    const start = Number((await chain.publicClient.getBlock()).timestamp) + 100;
    for (let i = 0; i < 20; i++) {
      await chain.testClient.setNextBlockTimestamp({ timestamp: BigInt(start + i * 10) });
      await chain.testClient.mine({ blocks: 1 });
    }
    const head = await chain.publicClient.getBlockNumber();
    const block5 = head - 19n + 5n;
    assert.equal(await lastBlockAtOrBefore(client, head, start + 55), block5);
    assert.equal(await lastBlockAtOrBefore(client, head, start + 50), block5);
    assert.equal(await lastBlockAtOrBefore(client, head, start + 10_000), head);
    assert.equal(await lastBlockAtOrBefore(client, head, 0), 0n);
  });

  test("credits a deposit that landed before the watcher's very first tick", async () => {
    const p = await seedProject(t);
    const hash = await chain.wallets[2]!.sendTransaction({
      to: p.depositAddress as Address,
      value: 10n ** 18n,
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    await chain.testClient.mine({ blocks: 5 });
    // No cursor, no start block: the watcher must look back to when the address was handed out.
    const watcher = depositWatcher({
      db: t.db,
      client: createChainClient(chain.rpcUrl),
      chainId: chain.chainId,
      confirmations: 2,
    });
    await watcher.tick();
    const rows = await t.db.query<{ b: string }>(
      "SELECT gas_tank_balance::text AS b FROM projects WHERE id = $1",
      [p.projectId],
    );
    assert.equal(rows[0]!.b, (10n ** 18n).toString());
  });
});
