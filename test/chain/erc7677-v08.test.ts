/**
 * ERC-7677 on EntryPoint v0.8 with EIP-7702, end to end: an EOA delegates to the canonical
 * Simple7702Account in the same bundle that runs its first operation; viem's bundler client and
 * `createPaymasterClient` point at the service's `/rpc`; a real Alto bundler serves both entry
 * points; the v0.8 paymaster pays, and the settlement watcher of the v0.8 pair charges the tank
 * exactly the operation's actualGasCost.
 */
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { encodeFunctionData, http, parseEther } from "viem";
import {
  createBundlerClient,
  createPaymasterClient,
  toSimple7702SmartAccount,
} from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { seedProject, type TestApp } from "../support/app.ts";
import { type Bundler, startBundler } from "../support/bundler.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import { type DevnetStack, gameItemsAbi } from "../support/chain/devnet.ts";
import {
  allowlist,
  balanceOf,
  MINT_SELECTOR,
  type Project,
  type ServiceOnChain,
  settlementWatcherOn,
  startServiceOnChain,
} from "../support/chain-service.ts";

let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let bundler: Bundler;
let rpcUrl: string;

before(async () => {
  service = await startServiceOnChain({ confirmations: 0 });
  ({ chain, stack, t } = service);
  bundler = await startBundler({
    rpcUrl: chain.rpcUrl,
    entryPoints: [stack.entryPoint, stack.v08.entryPoint],
  });
  p = await seedProject(t);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    reference: "erc7677-v08:tank",
    amountWei: parseEther("1"),
  });
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  rpcUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/rpc`;
});

after(async () => {
  await bundler?.stop();
  await service?.stop();
});

describe("ERC-7677 with EntryPoint v0.8 and EIP-7702", () => {
  test("a Simple7702Account's first operation (with eip7702Auth) lands through /rpc and settles to the wei", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const account = await toSimple7702SmartAccount({ client: chain.publicClient, owner });
    assert.equal(account.entryPoint.address.toLowerCase(), stack.v08.entryPoint.toLowerCase());
    const paymaster = createPaymasterClient({
      transport: http(rpcUrl, { fetchOptions: { headers: { authorization: `Bearer ${p.apiKey}` } } }),
    });
    const client = createBundlerClient({
      client: chain.publicClient,
      chain: chain.chain,
      account,
      paymaster,
      transport: http(bundler.url),
      pollingInterval: 50,
    });
    const authorization = await owner.signAuthorization({
      address: stack.v08.simple7702Account,
      chainId: chain.chainId,
      nonce: await chain.publicClient.getTransactionCount({ address: owner.address }),
    });
    const before = await balanceOf(t, p);
    const hash = await client.sendUserOperation({
      calls: [
        {
          to: stack.gameItems,
          data: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [70n] }),
        },
      ],
      authorization,
    });
    const receipt = await client.waitForUserOperationReceipt({ hash });
    assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
    assert.equal(receipt.paymaster?.toLowerCase(), stack.v08.paymaster.toLowerCase());

    await settlementWatcherOn(service, { confirmations: 0, startBlock: 0n, version: "0.8" }).tick();
    assert.equal(
      before - (await balanceOf(t, p)),
      receipt.actualGasCost,
      "the tank paid exactly actualGasCost",
    );
    const [row] = await t.db.query<{ status: string; paymaster: string; mode: string }>(
      "SELECT status, paymaster, mode FROM sponsorships WHERE user_op_hash = decode(substr($1, 3), 'hex')",
      [hash.toLowerCase()],
    );
    assert.deepEqual(row, {
      status: "success",
      paymaster: stack.v08.paymaster.toLowerCase(),
      mode: "operation",
    });
  });
});
