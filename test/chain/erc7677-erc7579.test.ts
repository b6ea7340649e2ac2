/**
 * ERC-7677 end to end with an ERC-7579 account: viem's `createBundlerClient` with
 * `createPaymasterClient` pointed at the service's `/rpc`, a real Alto bundler and the real
 * EntryPoint v0.7 on anvil, and an account whose calldata is ERC-7579
 * `execute(bytes32 mode, bytes executionCalldata)`. Each operation lands, settles to the wei (the
 * tank pays exactly the EntryPoint's actualGasCost) and is recorded with every call the account
 * makes, as the service decoded it from the calldata; a batch with one call off the allowlist is
 * refused, naming the call, before it reaches the bundler.
 *
 * The account is OpenZeppelin Contracts 5.7's AccountERC7579 with an ECDSA owner
 * (contracts/test/Modular7579Account.sol, a few lines of ours over OpenZeppelin's maintained
 * implementation) and the viem account for it is ours too (test/support/chain/modular-account.ts):
 * no npm package ships the release bytecode of Kernel v3, Nexus or Safe7579 with the validator
 * modules permissionless's helpers install.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Abi, type AbiFunction, type Address, type BaseError, type Hex, parseEther } from "viem";
import type { TestApp } from "../support/app.ts";
import type { Bundler } from "../support/bundler.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import { type DevnetStack, ENTRY_POINT_V07_ADDRESS, gameItemsAbi } from "../support/chain/devnet.ts";
import {
  deployModular7579Factory,
  ERC7579_MODE_BATCH,
  ERC7579_MODE_SINGLE,
  type Modular7579SmartAccount,
  modular7579AccountAbi,
  modular7579AccountFactoryAbi,
  modular7579Artifact,
  toModular7579SmartAccount,
} from "../support/chain/modular-account.ts";
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
const ERC7579_EXECUTE_SELECTOR = "0xe9ae5c53";

let fixture: Erc7677Fixture;
let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let bundler: Bundler;
let factory: Address;

before(async () => {
  fixture = await startErc7677Fixture({
    tankWei: TANK_WEI,
    tankReference: "erc7677-erc7579:tank",
    prepare: async (c) => {
      factory = await deployModular7579Factory(c);
    },
  });
  ({ service, chain, stack, t, p, bundler } = fixture);
});

after(async () => {
  await fixture?.stop();
});

const mint = (itemId: bigint) => mintCall(stack, itemId);

function modularAccount() {
  return toModular7579SmartAccount({ client: chain.publicClient, owner: randomAccount(), factory });
}

const sponsoredClient = (account: Modular7579SmartAccount) => sponsoredBundlerClient(fixture, account);

const sponsorshipCount = () => sponsorshipCountOf(fixture);

/** A call as the sponsorship records it. */
interface RecordedCall {
  target: string;
  selector: string;
}

/**
 * Sends the calls through the service's paymaster, settles, and checks that the operation was
 * the ERC-7579 `execute` with the expected mode, that the tank paid exactly what the EntryPoint
 * charged, that the sponsorship lists every call and that every call ran.
 */
async function sendAndSettle(account: Modular7579SmartAccount, calls: Call[], mode: Hex): Promise<void> {
  const client = sponsoredClient(account);
  const before = await balanceOf(t, p);
  const hash = await client.sendUserOperation({ calls });
  const receipt = await client.waitForUserOperationReceipt({ hash });
  assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
  assert.equal(receipt.paymaster?.toLowerCase(), stack.paymaster.toLowerCase());
  assert.equal(receipt.sender.toLowerCase(), account.address.toLowerCase());
  const { userOperation } = await client.getUserOperation({ hash });
  assert.equal(userOperation.callData.slice(0, 10), ERC7579_EXECUTE_SELECTOR);
  assert.equal(
    `0x${userOperation.callData.slice(10, 74)}`,
    mode,
    "the operation used the expected ERC-7579 mode",
  );

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
  for (const c of calls) {
    const itemId = BigInt(`0x${c.data.slice(10)}`);
    const count = await chain.publicClient.readContract({
      address: stack.gameItems,
      abi: gameItemsAbi,
      functionName: "itemsOf",
      args: [account.address, itemId],
    });
    assert.equal(count, 1n, `item ${itemId} was minted to the account once`);
  }
}

describe("ERC-7677 with an ERC-7579 account (OpenZeppelin AccountERC7579), viem's paymaster client, Alto and EntryPoint v0.7", () => {
  test("the hand-written ABIs of the account and its factory match the compiled contracts", () => {
    const pairs = [
      [modular7579AccountAbi, modular7579Artifact("Modular7579Account").abi],
      [modular7579AccountFactoryAbi, modular7579Artifact("Modular7579AccountFactory").abi],
    ] as const;
    for (const [handWritten, compiled] of pairs) {
      for (const item of handWritten) {
        const match = (compiled as Abi).find(
          (c): c is AbiFunction => c.type === "function" && c.name === item.name,
        );
        assert.ok(match, `${item.name} is in the compiled ABI`);
        assert.deepEqual(
          { inputs: match.inputs.map((i) => i.type), outputs: match.outputs.map((o) => o.type) },
          { inputs: item.inputs.map((i) => i.type), outputs: item.outputs.map((o) => o.type) },
        );
        assert.equal(match.stateMutability, item.stateMutability);
      }
    }
  });

  test("a single call (call type 0x00) lands and settles to the wei; the first operation deploys OpenZeppelin's account for the owner", async () => {
    const owner = randomAccount();
    const account = await toModular7579SmartAccount({ client: chain.publicClient, owner, factory });
    assert.equal(await account.isDeployed(), false);
    await sendAndSettle(account, [mint(201n)], ERC7579_MODE_SINGLE);
    assert.equal(await account.isDeployed(), true);
    const read = <const name extends "signer" | "entryPoint" | "accountId">(functionName: name) =>
      chain.publicClient.readContract({ address: account.address, abi: modular7579AccountAbi, functionName });
    assert.equal(await read("accountId"), "@openzeppelin/contracts.AccountERC7579.v1.0.0");
    assert.equal((await read("entryPoint")).toLowerCase(), ENTRY_POINT_V07_ADDRESS.toLowerCase());
    assert.equal((await read("signer")).toLowerCase(), owner.address.toLowerCase());
    await sendAndSettle(account, [mint(202n)], ERC7579_MODE_SINGLE);
  });

  test("a batch of two allowlisted calls (call type 0x01) lands, settles to the wei and records both calls", async () => {
    const account = await modularAccount();
    await sendAndSettle(account, [mint(203n), mint(204n)], ERC7579_MODE_BATCH);
  });

  test("an ERC-7579 batch with one call off the allowlist is refused, naming the call, before it reaches the bundler", async () => {
    const account = await modularAccount();
    const client = sponsoredClient(account);
    const before = { balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() };
    const bundlerLogBefore = bundler.output().length;
    await assert.rejects(
      client.sendUserOperation({ calls: [mint(205n), { to: NOT_ALLOWLISTED, data: mint(205n).data }] }),
      (err: BaseError) => {
        const refusal = err.walk((e) => (e as { data?: { code?: string } }).data?.code === "not_allowlisted");
        const data = (refusal as { data?: { callIndex?: number } } | null)?.data;
        return data?.callIndex === 1 && err.message.includes(`call 1 (${NOT_ALLOWLISTED}`);
      },
    );
    assert.deepEqual({ balance: await balanceOf(t, p), sponsorships: await sponsorshipCount() }, before);
    assert.doesNotMatch(
      bundler.output().slice(bundlerLogBefore),
      /eth_estimateUserOperationGas|eth_sendUserOperation/,
    );
    assert.equal(await account.isDeployed(), false, "nothing reached the chain");
  });
});
