/**
 * Readiness's paymaster check (health/paymaster-identity.ts) on anvil with the real EntryPoints:
 * a paymaster whose signer() is this instance's key is ok; after setSigner to another key it is
 * degraded and critical, naming both addresses; during a rotation window an instance still on the
 * previous key is told how long it has; an address with no contract, or a wrong EntryPoint, is
 * degraded; an RPC that does not answer is degraded.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { createChainClient } from "../../src/chains/rpc.ts";
import { paymasterIdentityProbe } from "../../src/health/paymaster-identity.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, sponsorPaymasterAbi } from "../support/chain/devnet.ts";

describe("readiness: the paymaster's identity", () => {
  let chain: DevChain;
  let stack: DevnetStack;
  const ours = privateKeyToAddress(generatePrivateKey());
  const next = privateKeyToAddress(generatePrivateKey());

  before(async () => {
    chain = await startChain();
    stack = await deployStack(chain, { signer: ours });
  });
  after(async () => {
    await chain?.stop();
  });

  const probe = (
    over: { paymaster?: Address; entryPoint?: Address; signer?: Address; rpcUrl?: string } = {},
  ) =>
    paymasterIdentityProbe({
      chainId: chain.chainId,
      pair: {
        version: "0.7",
        entryPoint: over.entryPoint ?? stack.entryPoint,
        paymaster: over.paymaster ?? stack.paymaster,
      },
      client: createChainClient(over.rpcUrl ?? chain.rpcUrl, { timeoutMs: 1_000, retryCount: 0 }),
      signer: over.signer ?? ours,
      cacheMs: 0,
    });

  const owner = () => chain.wallets[0]!;
  const send = async (functionName: "setSigner" | "rotateSigner", args: readonly unknown[]) => {
    const hash = await owner().writeContract({
      address: stack.paymaster,
      abi: sponsorPaymasterAbi,
      functionName,
      args: args as never,
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
  };

  test("ok when signer() is this instance's key, on the configured EntryPoint", async () => {
    const result = await probe().check();
    assert.equal(result.status, "ok", result.detail);
    assert.equal(probe().name, `chain:${chain.chainId}:paymaster`);
  });

  test("no contract, or another EntryPoint: degraded and critical", async () => {
    const empty = await probe({ paymaster: "0x00000000000000000000000000000000000000aa" }).check();
    assert.equal(empty.status, "degraded");
    assert.equal(empty.critical, true);
    assert.match(empty.detail!, /no contract at 0x0+aa/i);
    const wrongEntryPoint = await probe({ entryPoint: stack.v08.entryPoint }).check();
    assert.equal(wrongEntryPoint.status, "degraded");
    assert.match(wrongEntryPoint.detail!, /entryPoint\(\) is .* but the configured EntryPoint v0.7 is/);
  });

  test("during a rotation window the previous key is told its deadline; after setSigner it is refused", async () => {
    const latest = await chain.publicClient.getBlock({ blockTag: "latest" });
    await send("rotateSigner", [next, Number(latest.timestamp) + 3_600]);
    const onPrevious = await probe().check();
    assert.equal(onPrevious.status, "degraded");
    assert.equal(onPrevious.critical, true);
    assert.match(
      onPrevious.detail!,
      /is the previous signer .* accepted only until block time \d+ \(\d+ s\)/,
    );
    assert.equal((await probe({ signer: next }).check()).status, "ok");

    await send("setSigner", [next]);
    const replaced = await probe().check();
    assert.equal(replaced.status, "degraded");
    assert.match(
      replaced.detail!,
      new RegExp(`signer\\(\\) is ${next}, but this instance's signer key is ${ours}`, "i"),
    );
  });

  test("an RPC that does not answer is degraded", async () => {
    const result = await probe({ rpcUrl: "http://127.0.0.1:9" }).check();
    assert.equal(result.status, "degraded");
    assert.match(result.detail!, /could not read the paymaster/);
  });
});
