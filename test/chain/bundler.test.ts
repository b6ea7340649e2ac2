/**
 * The bundler harness against a real chain: Alto (test/support/bundler.ts) serves the
 * EntryPoint v0.7 that deployStack put on anvil, and carries a plain, unsponsored user
 * operation from a new SimpleAccount (the account pays its own gas) all the way on chain:
 * estimated by Alto, signed by permissionless's SimpleAccount, bundled and mined.
 *
 * Nothing here involves the sponsor paymaster; this file proves the harness that the
 * sponsored end-to-end tests build on.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { type Address, encodeFunctionData, http, parseEther, zeroAddress } from "viem";
import { createBundlerClient } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { type Bundler, startBundler } from "../support/bundler.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, gameItemsAbi } from "../support/chain/devnet.ts";

const ITEM_ID = 7n;

let chain: DevChain;
let stack: DevnetStack;
let bundler: Bundler;

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: privateKeyToAccount(generatePrivateKey()).address });
  bundler = await startBundler({ rpcUrl: chain.rpcUrl, entryPoints: [stack.entryPoint] });
});

after(async () => {
  await bundler?.stop();
  await chain?.stop();
});

async function rpc(method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(bundler.url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const reply = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (reply.error) throw new Error(`${method}: ${reply.error.message}`);
  return reply.result;
}

function itemCount(player: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [player, ITEM_ID],
  });
}

describe("Alto bundler on anvil", () => {
  test("serves the stack's EntryPoint v0.7 on the chain's id", async () => {
    assert.deepEqual(
      ((await rpc("eth_supportedEntryPoints")) as string[]).map((a) => a.toLowerCase()),
      [stack.entryPoint.toLowerCase()],
    );
    assert.equal(Number(await rpc("eth_chainId")), chain.chainId);
  });

  test("an unsponsored operation from a new SimpleAccount is estimated, bundled and mined", async (t) => {
    const account = await toSimpleSmartAccount({
      client: chain.publicClient,
      owner: privateKeyToAccount(generatePrivateKey()),
      entryPoint: { address: stack.entryPoint, version: "0.7" },
      factoryAddress: stack.accountFactory,
    });
    // No paymaster: the account pays the EntryPoint's prefund out of its own balance.
    await chain.publicClient.waitForTransactionReceipt({
      hash: await chain.wallets[0]!.sendTransaction({ to: account.address, value: parseEther("1") }),
    });

    const bundlerClient = createBundlerClient({
      client: chain.publicClient,
      chain: chain.chain,
      account,
      transport: http(bundler.url),
      pollingInterval: 50,
    });
    const calls = [
      {
        to: stack.gameItems,
        data: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] }),
      },
    ];

    const estimate = await bundlerClient.estimateUserOperationGas({ calls });
    t.diagnostic(
      `eth_estimateUserOperationGas: ${JSON.stringify(estimate, (_, v) => (typeof v === "bigint" ? v.toString() : v))}`,
    );
    assert.ok(estimate.preVerificationGas > 0n);
    assert.ok(estimate.verificationGasLimit > 0n);
    assert.ok(estimate.callGasLimit > 0n);
    assert.equal(estimate.paymasterVerificationGasLimit ?? 0n, 0n);
    assert.equal(estimate.paymasterPostOpGasLimit ?? 0n, 0n);

    const userOpHash = await bundlerClient.sendUserOperation({ calls });
    const receipt = await bundlerClient.waitForUserOperationReceipt({ hash: userOpHash });

    assert.equal(
      receipt.success,
      true,
      `operation failed: ${receipt.reason ?? "no reason"}\n${bundler.output()}`,
    );
    assert.equal(receipt.userOpHash, userOpHash);
    assert.equal(receipt.sender.toLowerCase(), account.address.toLowerCase());
    assert.equal((receipt.paymaster ?? zeroAddress).toLowerCase(), zeroAddress);
    assert.equal(receipt.receipt.status, "success");
    assert.ok(receipt.actualGasCost > 0n);
    assert.equal(await itemCount(account.address), 1n);
    // The account is deployed by that first operation.
    assert.notEqual(await chain.publicClient.getCode({ address: account.address }), undefined);
  });
});
