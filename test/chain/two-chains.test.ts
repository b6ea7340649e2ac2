/**
 * Two real chains at once (two anvil nodes, chain ids 14601 and 31337, currencies S and LOC),
 * each with its own EntryPoint and paymaster, deposit watcher and settlement watcher (issue 23): a
 * transfer credits the tank of the chain it was made on and no other, an authorization on a chain
 * whose tank is empty is 402 however full the other tank is, and a reorganisation on one chain
 * takes back only that chain's credit. Sponsored operations settle on the tank of the chain that
 * paid for them, an authorization signed for one chain is refused by the same paymaster address
 * on the other, a reorganised settlement is compensated on its own chain, and parity and chain
 * parity hold per chain throughout.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, type Hex, parseEther, parseEventLogs } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import type { DepositWatcher } from "../../src/funding/deposit-watcher.ts";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import {
  allowMintOnEveryChain,
  authorizeMint,
  seedProject,
  startTestApp,
  TEST_SIGNER_KEY,
  type TestApp,
} from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack } from "../support/chain/devnet.ts";
import {
  authorizedUserOp,
  type ChainParity,
  chainParity,
  depositWatcherOn,
  MINT_SELECTOR as GAME_MINT_SELECTOR,
  gasFor,
  mintCall,
  paymasterDeposit,
  settlementWatcherOn,
  userOpWith,
} from "../support/chain-service.ts";
import { addWebhookEndpoint } from "../support/receiver.ts";
import { handleOps, randomAccount } from "../support/userop.ts";

const CONFIRMATIONS = 2;
const HOME = 14601;
const OTHER = 31337;

const OPERATOR = "operator@example.com";

let home: DevChain;
let other: DevChain;
let stacks: Record<number, DevnetStack>;
let t: TestApp;

before(async () => {
  [home, other] = await Promise.all([startChain({ chainId: HOME }), startChain({ chainId: OTHER })]);
  const signer = privateKeyToAccount(TEST_SIGNER_KEY).address;
  const [homeStack, otherStack] = await Promise.all([
    deployStack(home, { signer }),
    deployStack(other, { signer }),
  ]);
  stacks = { [HOME]: homeStack, [OTHER]: otherStack };
  t = await startTestApp({
    env: {
      CHAINS: `${HOME},${OTHER}`,
      CHAIN_14601_RPC_URL: home.rpcUrl,
      CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_14601_PAYMASTER_ADDRESS: homeStack.paymaster,
      CHAIN_31337_NAME: "Local",
      CHAIN_31337_RPC_URL: other.rpcUrl,
      CHAIN_31337_CURRENCY_SYMBOL: "LOC",
      CHAIN_31337_CONFIRMATIONS: String(CONFIRMATIONS),
      CHAIN_31337_PAYMASTER_ADDRESS: otherStack.paymaster,
      OPERATOR_EMAILS: OPERATOR,
    },
  });
});

after(async () => {
  await t?.close();
  await Promise.all([home?.stop(), other?.stop()]);
});

function watcherOf(chain: DevChain): DepositWatcher {
  return depositWatcherOn(t, chain, CONFIRMATIONS);
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

/** A project whose allowlist entry is for every chain: the same game contract address on both local chains. */
async function projectOnEveryChain() {
  const p = await seedProject(t);
  await allowMintOnEveryChain(t, p);
  return p;
}

/** The same player each time. */
const authorize = (p: { projectId: string; apiKey: string }, chainId: number) =>
  authorizeMint(t, p, `0x${"ab".repeat(20)}`, chainId);

describe("two chains, two tanks", () => {
  test("a transfer credits the chain it was made on; an empty tank on the other chain is 402", async () => {
    const p = await projectOnEveryChain();
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

describe("two chains, two EntryPoints", () => {
  test("operations settle on the tank of the chain that paid; a chain's signature is refused on the other; a reorganised settlement is compensated on its own chain", async () => {
    const p = await seedProject(t);
    const chains: Record<number, DevChain> = { [HOME]: home, [OTHER]: other };
    for (const chainId of [HOME, OTHER]) {
      const allow = await t.request({
        method: "POST",
        url: `/projects/${p.projectId}/allowlist`,
        token: p.ownerToken,
        payload: {
          targetContract: stacks[chainId]!.gameItems,
          functionSelector: GAME_MINT_SELECTOR,
          chainId,
        },
      });
      assert.equal(allow.statusCode, 201, allow.body);
      await creditDeposit(t.db, {
        projectId: p.projectId,
        chainId,
        reference: `two:${chainId}:${p.projectId}`,
        amountWei: parseEther("1"),
      });
    }
    const watchers = Object.fromEntries(
      [HOME, OTHER].map((chainId) => [
        chainId,
        settlementWatcherOn(
          { chain: chains[chainId]!, stack: stacks[chainId]!, t },
          { confirmations: CONFIRMATIONS, startBlock: 0n },
        ),
      ]),
    );
    const depositsBefore = {
      [HOME]: await paymasterDeposit(home, stacks[HOME]!),
      [OTHER]: await paymasterDeposit(other, stacks[OTHER]!),
    };
    const parityBefore = {
      [HOME]: await chainParity(t, await t.token(OPERATOR), HOME),
      [OTHER]: await chainParity(t, await t.token(OPERATOR), OTHER),
    };

    /** One sponsored mint on `chainId`, authorized for it and run by its EntryPoint. */
    const mint = async (chainId: number) => {
      const chain = chains[chainId]!;
      const op = await authorizedUserOp(t, p, chain, stacks[chainId]!, randomAccount(), {
        target: stacks[chainId]!.gameItems,
        data: mintCall,
      });
      const receipt = await handleOps(chain.publicClient, chain.wallets[1]!, stacks[chainId]!.entryPoint, [
        op.userOp,
      ]);
      await chain.testClient.mine({ blocks: CONFIRMATIONS });
      const [event] = parseEventLogs({
        abi: entryPoint07Abi,
        logs: receipt.logs,
        eventName: "UserOperationEvent",
      });
      assert.equal(event?.args.success, true);
      return { authId: op.auth.authorizationId as Hex, cost: event!.args.actualGasCost, receipt };
    };
    // An endpoint for every event: each payload names its chain.
    await addWebhookEndpoint(t, p, "https://hooks.example.com/all");
    const homeOp = await mint(HOME);
    const otherOps = [await mint(OTHER), await mint(OTHER)];

    // The paymaster has the same address on both chains (the same deployer, the same nonces):
    // an authorization signed for the other chain does not pay on the home chain.
    assert.equal(stacks[HOME]!.paymaster, stacks[OTHER]!.paymaster);
    const signedForOther = await authorizedUserOp(t, p, other, stacks[OTHER]!, randomAccount(), {
      target: stacks[OTHER]!.gameItems,
      data: mintCall,
    });
    const replayed = await userOpWith(home, stacks[HOME]!, randomAccount(), {
      target: stacks[HOME]!.gameItems,
      data: mintCall,
      paymasterAndData: signedForOther.auth.paymasterAndData as Hex,
      gas: gasFor(signedForOther.auth),
    });
    await assert.rejects(
      handleOps(home.publicClient, home.wallets[1]!, stacks[HOME]!.entryPoint, [replayed.userOp]),
      /AA34|signature/i,
    );
    const openOnOther = BigInt(signedForOther.auth.maxGasCost);

    for (const chainId of [HOME, OTHER]) await watchers[chainId]!.tick();
    const spentOther = otherOps[0]!.cost + otherOps[1]!.cost;
    assert.deepEqual(await tanks(p.projectId), {
      [HOME]: parseEther("1") - homeOp.cost,
      [OTHER]: parseEther("1") - spentOther - openOnOther,
    });
    // Each EntryPoint deposit fell by what its own chain charged, and each chain's parity saw it.
    assert.equal(depositsBefore[HOME]! - (await paymasterDeposit(home, stacks[HOME]!)), homeOp.cost);
    assert.equal(depositsBefore[OTHER]! - (await paymasterDeposit(other, stacks[OTHER]!)), spentOther);
    for (const [chainId, paid, count] of [
      [HOME, homeOp.cost, 1],
      [OTHER, spentOther, 2],
    ] as const) {
      const report = await chainParity(t, await t.token(OPERATOR), chainId);
      assert.equal(BigInt(report.paidOnChain) - BigInt(parityBefore[chainId]!.paidOnChain), paid);
      assert.equal(BigInt(report.billed) - BigInt(parityBefore[chainId]!.billed), paid);
      assert.equal(report.operations - parityBefore[chainId]!.operations, count);
      assert.equal(report.unattributed, "0");
      assert.equal(report.depositCovers, true);
      assertSettlementInSync(report);
    }
    assert.deepEqual(await parityByChain(p.projectId), [
      [HOME, true],
      [OTHER, true],
    ]);
    // Every settlement's event names the chain that paid, with that chain's cost. The watcher
    // records a range's operations a few at once (APPLY_CONCURRENCY), so the two on the other
    // chain may write their events in either order: compared as sets of (chain, cost).
    const settledEvents = await t.db.query<{ chain: number; cost: string }>(
      `SELECT (payload ->> 'chainId')::int AS chain, payload ->> 'actualGasCost' AS cost FROM event_outbox
       WHERE project_id = $1 AND type = 'sponsorship.settled' ORDER BY id`,
      [p.projectId],
    );
    const byChainAndCost = (pairs: (readonly [number, string])[]) =>
      [...pairs].sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1]));
    assert.deepEqual(
      byChainAndCost(settledEvents.map((e) => [e.chain, e.cost] as const)),
      byChainAndCost([
        [HOME, homeOp.cost.toString()],
        [OTHER, otherOps[0]!.cost.toString()],
        [OTHER, otherOps[1]!.cost.toString()],
      ]),
    );
    const unnamed = await t.db.query(
      "SELECT type FROM event_outbox WHERE project_id = $1 AND NOT payload ? 'chainId'",
      [p.projectId],
    );
    assert.deepEqual(unnamed, []);
    // Parity in total: the organization's report counts both tanks of the project, in sync.
    const org = await t.request({
      method: "GET",
      url: `/orgs/${p.orgId}/funds/parity`,
      token: p.ownerToken,
    });
    assert.equal(org.statusCode, 200, org.body);
    const mine = (
      org.json().projects as { projectId: string; inSync: boolean; chains: { chainId: number }[] }[]
    ).find((x) => x.projectId === p.projectId);
    assert.deepEqual([mine?.inSync, mine?.chains.map((c) => c.chainId)], [true, [HOME, OTHER]]);
    // The studio's figures, per chain, from the real settlements.
    for (const [chainId, n, cost] of [
      [HOME, 1, homeOp.cost],
      [OTHER, 2, spentOther],
    ] as const) {
      const res = await t.request({
        method: "GET",
        url: `/projects/${p.projectId}/analytics/overview?chainId=${chainId}`,
        token: p.ownerToken,
      });
      assert.deepEqual([res.json().totalSponsored, res.json().totalGasSaved], [n, cost.toString()]);
    }

    // The other chain replaces the block of its last operation: that charge alone goes back, to
    // the other chain's tank; the home chain's settlement stands.
    const last = otherOps[1]!;
    const depth = (await other.publicClient.getBlockNumber()) - last.receipt.blockNumber + 1n;
    await reorganise(other, Number(depth));
    const report = await watchers[OTHER]!.tick();
    assert.equal(report.reorg?.compensated, 1);
    assert.equal((await watchers[HOME]!.tick()).reorg ?? null, null);
    assert.deepEqual(await tanks(p.projectId), {
      [HOME]: parseEther("1") - homeOp.cost,
      [OTHER]: parseEther("1") - otherOps[0]!.cost - openOnOther,
    });
    assert.deepEqual(await parityByChain(p.projectId), [
      [HOME, true],
      [OTHER, true],
    ]);
    const afterReorg = await chainParity(t, await t.token(OPERATOR), OTHER);
    assert.equal(
      BigInt(afterReorg.paidOnChain) - BigInt(parityBefore[OTHER]!.paidOnChain),
      otherOps[0]!.cost,
    );
    assertSettlementInSync(afterReorg);
  });
});

/**
 * What the chain paid equals what was billed, on every EntryPoint of the chain. (The whole
 * report's inSync also counts the first test's deposit reorganisation, whose shortfall stays.)
 */
function assertSettlementInSync(report: ChainParity) {
  const entryPoints = (report as ChainParity & { entryPoints: { inSync: boolean }[] }).entryPoints;
  assert.ok(entryPoints.length > 0);
  for (const e of entryPoints) assert.equal(e.inSync, true, JSON.stringify(report));
  assert.equal(report.paidOnChain, report.billed);
}

describe("a daily cap on two chains", () => {
  test("each chain's reservations count against the cap apart", async () => {
    const p = await projectOnEveryChain();
    for (const chainId of [HOME, OTHER]) {
      await creditDeposit(t.db, {
        projectId: p.projectId,
        chainId,
        reference: `cap:${chainId}:${p.projectId}`,
        amountWei: parseEther("1"),
      });
    }
    const first = await authorize(p, HOME);
    assert.equal(first.statusCode, 200, first.body);
    const [row] = await t.db.query<{ max: string }>(
      "SELECT max_gas_cost::text AS max FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
      [first.json().authorizationId],
    );
    const cap = (BigInt(row!.max) * 3n) / 2n;
    const patch = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { dailyCap: cap.toString() },
    });
    assert.equal(patch.statusCode, 200, patch.body);
    // The home chain has used two thirds of its day; the other chain none of its own.
    assert.equal((await authorize(p, HOME)).json().code, "daily_cap_exceeded");
    assert.equal((await authorize(p, OTHER)).statusCode, 200);
    assert.equal((await authorize(p, OTHER)).json().code, "daily_cap_exceeded");
  });
});
