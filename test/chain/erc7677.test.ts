/**
 * ERC-7677 end to end, the way a studio's client uses it with no glue: viem's
 * `createBundlerClient` with `createPaymasterClient` pointed at the service's `/rpc` over real
 * HTTP, permissionless's smart accounts, a real Alto bundler and the real EntryPoint v0.7 on
 * anvil. Operations land and settle to the wei (single call and batch); a batch with one call off
 * the allowlist is refused before it reaches the bundler; stub calls reserve nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { http, parseEther } from "viem";
import { createPaymasterClient, type SmartAccount } from "viem/account-abstraction";
import type { TestApp } from "../support/app.ts";
import type { Bundler } from "../support/bundler.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import type { DevnetStack } from "../support/chain/devnet.ts";
import {
  balanceOf,
  type Project,
  type ServiceOnChain,
  settlementWatcherOn,
} from "../support/chain-service.ts";
import {
  type Erc7677Fixture,
  mintCall,
  sponsoredBundlerClient,
  sponsorshipCount as sponsorshipCountOf,
  startErc7677Fixture,
} from "../support/erc7677.ts";
import { randomAccount } from "../support/userop.ts";

const TANK_WEI = parseEther("2");
const NOT_ALLOWLISTED = "0x00000000000000000000000000000000000000ee";

let fixture: Erc7677Fixture;
let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let bundler: Bundler;
let rpcUrl: string;

before(async () => {
  fixture = await startErc7677Fixture({ tankWei: TANK_WEI, tankReference: "erc7677:tank" });
  ({ service, chain, stack, t, p, bundler, rpcUrl } = fixture);
});

after(async () => {
  await fixture?.stop();
});

const mint = (itemId: bigint) => mintCall(stack, itemId);

const sponsoredClient = (account: SmartAccount, keyInUrl = false) =>
  sponsoredBundlerClient(fixture, account, { keyInUrl });

async function simpleAccount() {
  return toSimpleSmartAccount({
    client: chain.publicClient,
    owner: randomAccount(),
    entryPoint: { address: stack.entryPoint, version: "0.7" },
    factoryAddress: stack.accountFactory,
  });
}

const sponsorshipCount = () => sponsorshipCountOf(fixture);

/** Sends the calls, settles, and checks the tank paid exactly what the EntryPoint charged. */
async function sendAndSettle(account: SmartAccount, calls: ReturnType<typeof mint>[], keyInUrl = false) {
  const client = await sponsoredClient(account, keyInUrl);
  const before = await balanceOf(t, p);
  const hash = await client.sendUserOperation({ calls });
  const receipt = await client.waitForUserOperationReceipt({ hash });
  assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
  assert.equal(receipt.paymaster?.toLowerCase(), stack.paymaster.toLowerCase());
  await settlementWatcherOn(service, { confirmations: 0, startBlock: 0n }).tick();
  assert.equal(
    before - (await balanceOf(t, p)),
    receipt.actualGasCost,
    "the tank paid exactly actualGasCost",
  );
  const [row] = await t.db.query<{ status: string; mode: string; calls: unknown }>(
    "SELECT status, mode, calls FROM sponsorships WHERE user_op_hash = decode(substr($1, 3), 'hex')",
    [hash.toLowerCase()],
  );
  assert.equal(row?.status, "success");
  assert.equal(row?.mode, "operation");
  return receipt;
}

describe("ERC-7677 with viem's paymaster client, a real bundler and EntryPoint v0.7", () => {
  test("a SimpleAccount's single call lands and settles to the wei (its first operation deploys it)", async () => {
    const account = await simpleAccount();
    await sendAndSettle(account, [mint(1n)]);
    await sendAndSettle(account, [mint(2n)]);
  });

  test("a SimpleAccount's batch of allowlisted calls lands and settles to the wei", async () => {
    const account = await simpleAccount();
    await sendAndSettle(account, [mint(3n), mint(4n), mint(5n)]);
  });

  test("the API key in the URL (EIP-5792 wallets) works and is never logged", async () => {
    const account = await simpleAccount();
    await sendAndSettle(account, [mint(6n)], true);
    assert.ok(!t.logs.some((line) => line.includes(p.apiKey)));
  });

  test("a batch with one call off the allowlist is refused before it reaches the bundler, reserving nothing", async () => {
    const account = await simpleAccount();
    const client = await sponsoredClient(account);
    const before = { balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() };
    const bundlerLogBefore = bundler.output().length;
    await assert.rejects(
      client.sendUserOperation({ calls: [mint(7n), { to: NOT_ALLOWLISTED, data: mint(7n).data }] }),
      (err: Error) => /not_allowlisted|call 1/.test(`${err.message} ${JSON.stringify(err)}`),
    );
    assert.deepEqual({ balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() }, before);
    assert.doesNotMatch(
      bundler.output().slice(bundlerLogBefore),
      /eth_estimateUserOperationGas|eth_sendUserOperation/,
    );
  });

  test("stub calls reserve nothing", async () => {
    const account = await simpleAccount();
    const paymaster = createPaymasterClient({
      transport: http(rpcUrl, { fetchOptions: { headers: { authorization: `Bearer ${p.apiKey}` } } }),
    });
    const before = { balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() };
    for (let i = 0; i < 5; i++) {
      const stub = await paymaster.getPaymasterStubData({
        chainId: chain.chainId,
        entryPointAddress: stack.entryPoint,
        sender: account.address,
        nonce: 0n,
        // Not deployed yet: the stub sees the factory, as a first operation carries it.
        ...(await account.getFactoryArgs()),
        callData: await account.encodeCalls([mint(8n)]),
        maxFeePerGas: 1_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
      });
      assert.equal(stub.isFinal, false);
    }
    assert.deepEqual({ balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() }, before);
  });
});
