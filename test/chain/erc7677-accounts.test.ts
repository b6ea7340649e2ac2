/**
 * ERC-7677 end to end with third-party smart accounts, built by permissionless's own helpers
 * at their default addresses: viem's `createBundlerClient` with `createPaymasterClient` pointed
 * at the service's `/rpc`, a real Alto bundler and the real EntryPoint v0.7 on anvil. Each
 * operation lands, settles to the wei (the tank pays exactly the EntryPoint's actualGasCost) and
 * is recorded with every call the account makes, as the service decoded it from the calldata.
 *
 * Safe: Safe 1.4.1 with the Safe4337Module 0.3.0 (`executeUserOpWithErrorString`; a batch is a
 * delegatecall into MultiSendCallOnly).
 *
 * ERC-7579 (`execute(bytes32,bytes)`, single and batch call types) has its own end-to-end test,
 * test/chain/erc7677-erc7579.test.ts, with OpenZeppelin's AccountERC7579: no npm package ships the
 * release bytecode of Kernel v3, Nexus or Safe7579 with the validator modules permissionless's
 * helpers install, so that account is not one of permissionless's.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { toSafeSmartAccount } from "permissionless/accounts";
import { type Address, type BaseError, parseEther } from "viem";
import type { SmartAccount } from "viem/account-abstraction";
import type { TestApp } from "../support/app.ts";
import type { Bundler } from "../support/bundler.ts";
import { deploySafeContracts, SAFE_V141_ADDRESSES } from "../support/chain/accounts.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import { type DevnetStack, gameItemsAbi } from "../support/chain/devnet.ts";
import {
  balanceOf,
  type Project,
  type ServiceOnChain,
  settlementWatcherOn,
} from "../support/chain-service.ts";
import {
  type Call,
  type Erc7677Fixture,
  mintCall,
  sponsoredBundlerClient,
  sponsorshipCount as sponsorshipCountOf,
  startErc7677Fixture,
} from "../support/erc7677.ts";
import { randomAccount } from "../support/userop.ts";

const TANK_WEI = parseEther("2");
const NOT_ALLOWLISTED: Address = "0x00000000000000000000000000000000000000ee";

let fixture: Erc7677Fixture;
let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let bundler: Bundler;

before(async () => {
  fixture = await startErc7677Fixture({
    tankWei: TANK_WEI,
    tankReference: "erc7677-accounts:tank",
    prepare: deploySafeContracts,
  });
  ({ service, chain, stack, t, p, bundler } = fixture);
});

after(async () => {
  await fixture?.stop();
});

const mint = (itemId: bigint) => mintCall(stack, itemId);

const sponsoredClient = (account: SmartAccount) => sponsoredBundlerClient(fixture, account);

const sponsorshipCount = () => sponsorshipCountOf(fixture);

/** A call as the sponsorship records it. */
interface RecordedCall {
  target: string;
  selector: string;
}

/**
 * Sends the calls through the service's paymaster, settles, and checks that the tank paid
 * exactly what the EntryPoint charged and that the sponsorship lists every call. Returns the
 * decoded calls as recorded.
 */
async function sendAndSettle(account: SmartAccount, calls: Call[]): Promise<RecordedCall[]> {
  const client = sponsoredClient(account);
  const before = await balanceOf(t, p);
  const hash = await client.sendUserOperation({ calls });
  const receipt = await client.waitForUserOperationReceipt({ hash });
  assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
  assert.equal(receipt.paymaster?.toLowerCase(), stack.paymaster.toLowerCase());
  assert.equal(receipt.sender.toLowerCase(), account.address.toLowerCase());
  await settlementWatcherOn(service, { confirmations: 0, startBlock: 0n }).tick();
  assert.equal(
    before - (await balanceOf(t, p)),
    receipt.actualGasCost,
    "the tank paid exactly actualGasCost",
  );

  const [row] = await t.db.query<{ status: string; mode: string; calls: RecordedCall[] }>(
    "SELECT status, mode, calls FROM sponsorships WHERE user_op_hash = decode(substr($1, 3), 'hex')",
    [hash.toLowerCase()],
  );
  assert.equal(row?.status, "success");
  assert.equal(row?.mode, "operation");
  assert.deepEqual(
    row.calls.map((c) => ({ target: c.target.toLowerCase(), selector: c.selector.toLowerCase() })),
    calls.map((c) => ({ target: c.to.toLowerCase(), selector: c.data.slice(0, 10).toLowerCase() })),
    "the sponsorship lists every call the account makes",
  );
  // The calls really ran: each mint credited the account one item.
  for (const c of calls) {
    const itemId = BigInt(`0x${c.data.slice(10)}`);
    const count = await chain.publicClient.readContract({
      address: stack.gameItems,
      abi: gameItemsAbi,
      functionName: "itemsOf",
      args: [account.address, itemId],
    });
    assert.ok(count >= 1n, `item ${itemId} was minted to the account`);
  }
  return row.calls;
}

describe("ERC-7677 with permissionless's Safe, viem's paymaster client, Alto and EntryPoint v0.7", () => {
  async function safeAccount() {
    return toSafeSmartAccount({
      client: chain.publicClient,
      owners: [randomAccount()],
      version: "1.4.1",
      entryPoint: { address: stack.entryPoint, version: "0.7" },
    });
  }

  test("the Safe contracts are where permissionless looks for them", async () => {
    for (const [name, address] of Object.entries(SAFE_V141_ADDRESSES)) {
      const code = await chain.publicClient.getCode({ address });
      assert.ok(code && code !== "0x", `${name} has code at ${address}`);
    }
  });

  test("a Safe's single call (executeUserOpWithErrorString, operation 0) lands and settles to the wei; its first operation deploys it", async () => {
    const account = await safeAccount();
    assert.equal(await account.isDeployed(), false);
    await sendAndSettle(account, [mint(101n)]);
    assert.equal(await account.isDeployed(), true);
    await sendAndSettle(account, [mint(102n)]);
  });

  test("a Safe's batch (a delegatecall into MultiSendCallOnly) lands and settles to the wei", async () => {
    const account = await safeAccount();
    await sendAndSettle(account, [mint(103n), mint(104n), mint(105n)]);
  });

  test("a Safe batch with one call off the allowlist is refused, naming the call, before it reaches the bundler", async () => {
    const account = await safeAccount();
    const client = sponsoredClient(account);
    const before = { balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() };
    const bundlerLogBefore = bundler.output().length;
    await assert.rejects(
      client.sendUserOperation({ calls: [mint(106n), { to: NOT_ALLOWLISTED, data: mint(106n).data }] }),
      (err: BaseError) => {
        const refusal = err.walk((e) => (e as { data?: { code?: string } }).data?.code === "not_allowlisted");
        return refusal !== null && err.message.includes(`call 1 (${NOT_ALLOWLISTED}`);
      },
    );
    assert.deepEqual({ balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() }, before);
    assert.doesNotMatch(
      bundler.output().slice(bundlerLogBefore),
      /eth_estimateUserOperationGas|eth_sendUserOperation/,
    );
  });
});
