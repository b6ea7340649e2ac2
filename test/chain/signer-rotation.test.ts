/**
 * Rotating the paymaster's signer without breaking the authorizations in flight, on anvil with the
 * real EntryPoints. First the operator's procedure end to end through the service: authorizations
 * issued with the old key, `rotate-signer` (the operator CLI), a restart with the new key, both
 * keys' authorizations landing in one bundle, and the old key refused once its deadline passed.
 * Then the contract's rule on both builds: the previous key's authorizations come back with
 * validUntil = min(their own, the deadline), which the EntryPoint enforces (AA32); a key that is
 * neither is a signature failure (AA34); setSigner forgets the previous key at once.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Address,
  getAddress,
  type Hex,
  type Log,
  parseEther,
  parseEventLogs,
  recoverAddress,
  zeroAddress,
} from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { runCli } from "../../src/operator/cli.ts";
import { callSponsorshipDigest } from "../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import { decodePaymasterAndData } from "../../src/paymaster/layout.ts";
import { openTestDb, seedProject, startTestApp, type TestApp, type TestDb } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import {
  type DevnetStack,
  deployStack,
  localArtifact,
  sponsorPaymasterAbi,
} from "../support/chain/devnet.ts";
import {
  type Authorization,
  allowlist,
  authorizedUserOp,
  balanceOf,
  MINT_SELECTOR,
  mintCall,
  type Project,
  watcherClient,
} from "../support/chain-service.ts";
import { measurePaymasterVerificationGas } from "../support/gas-search.ts";
import {
  handleOps,
  latestTimestampSec,
  randomAccount,
  type SponsoredOp,
  type SponsoredOpParams,
  type SponsorStack,
  simulateHandleOps,
  sponsoredUserOp,
} from "../support/userop.ts";

const CONFIRMATIONS = 1;
const ONE_DAY_SEC = 86_400;

let chain: DevChain;
let stack: DevnetStack;
const bundler = () => chain.wallets[1]!;
const owner = () => chain.wallets[0]!;

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: randomAccount().address });
});

after(async () => {
  await chain?.stop();
});

function bundleEvents(logs: Log[]) {
  return parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationEvent" });
}

describe("the rotation procedure through the service (EntryPoint v0.7)", () => {
  const oldKey = generatePrivateKey();
  const newKey = generatePrivateKey();
  const operatorKey = generatePrivateKey();
  const oldSigner = privateKeyToAccount(oldKey).address;
  const newSigner = privateKeyToAccount(newKey).address;
  // Both instances share the store and the data directory (the local token issuer's key), as two
  // deployments of the service do; only SIGNER_PRIVATE_KEY differs.
  const dataDir = `memory://rotation-${oldSigner.slice(2, 10)}`;
  let paymaster: Address;
  let db: TestDb;
  let t: TestApp;
  let p: Project;
  /** The service's clock follows the chain's, which the test moves forward. */
  let chainAheadMs = 0;

  const serviceEnv = (signerKey: Hex) => ({
    DATA_DIR: dataDir,
    SIGNER_PRIVATE_KEY: signerKey,
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    CHAIN_14601_PAYMASTER_ADDRESS: paymaster,
    CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS),
  });
  const startService = async (signerKey: Hex) => {
    const app = await startTestApp({
      db,
      env: serviceEnv(signerKey),
      feeOracle: "chain",
      now: () => Date.now() + chainAheadMs,
    });
    for (const secret of [oldKey, newKey, operatorKey]) app.secrets.add(secret).add(secret.slice(2));
    return app;
  };
  const mintFor = () =>
    authorizedUserOp(t, p, chain, stack, randomAccount(), { target: stack.gameItems, data: mintCall });

  before(async () => {
    paymaster = await deployPaymaster("0.7", oldSigner);
    // The operator's key owns the paymaster, as after `deploy` with --owner.
    await chain.testClient.setBalance({
      address: privateKeyToAccount(operatorKey).address,
      value: parseEther("10"),
    });
    await confirm(
      await owner().writeContract({
        address: paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "transferOwnership",
        args: [privateKeyToAccount(operatorKey).address],
      }),
    );
    db = await openTestDb();
    t = await startService(oldKey);
    p = await seedProject(t);
    await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
    // The longest window a project can have, so that an old authorization outlives the deadline.
    const ttl = await t.request({
      method: "PATCH",
      url: `/projects/${p.projectId}`,
      token: p.ownerToken,
      payload: { validityTtlSec: 3600 },
    });
    assert.equal(ttl.statusCode, 200, ttl.body);
    const hash = await chain.wallets[3]!.sendTransaction({
      to: p.depositAddress as Address,
      value: parseEther("2"),
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    await chain.testClient.mine({ blocks: CONFIRMATIONS });
    await depositWatcher({
      db: t.db,
      client: watcherClient(chain),
      chainId: chain.chainId,
      confirmations: CONFIRMATIONS,
      startBlock: 0n,
    }).tick();
    assert.equal(await balanceOf(t, p), parseEther("2"));
  });

  after(async () => {
    await t?.close();
    await db?.drop();
  });

  test("old-key authorizations in flight and new-key ones both land; after the deadline the old key is refused (AA32)", async () => {
    // In flight: issued by the service running with the old key, not yet submitted.
    const landsLater = await mintFor();
    const outlivesDeadline = await mintFor();
    assert.equal(
      await recoveredSigner(landsLater.auth, landsLater.sender, landsLater.userOp.initCode),
      oldSigner,
    );
    assert.equal(
      await recoveredSigner(outlivesDeadline.auth, outlivesDeadline.sender, outlivesDeadline.userOp.initCode),
      oldSigner,
    );

    // (a) The operator rotates, keeping the old key for 600 s (production: the longest TTL + a margin).
    const before = await latestTimestampSec(chain);
    const cli = await operatorCli(["rotate-signer", newSigner, "--previous-valid-for", "600"], {
      OPERATOR_PRIVATE_KEY: operatorKey,
      ...serviceEnv(newKey),
    });
    assert.equal(cli.status, 0, cli.err.join("\n"));
    assert.equal(await read(paymaster, "signer"), newSigner);
    assert.equal(await read(paymaster, "previousSigner"), oldSigner);
    assert.equal(await read(paymaster, "previousSignerValidUntil"), before + 600);
    assert.ok(![...cli.out, ...cli.err].some((line) => line.includes(operatorKey.slice(2))));

    // (b) The service restarts with the new key and signs with it.
    await t.close();
    t = await startService(newKey);
    const fresh = await mintFor();
    assert.equal(await recoveredSigner(fresh.auth, fresh.sender, fresh.userOp.initCode), newSigner);

    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [
      landsLater.userOp,
      fresh.userOp,
    ]);
    const events = bundleEvents(receipt.logs);
    assert.deepEqual(
      events.map((e) => [e.args.userOpHash, e.args.paymaster, e.args.success]),
      [
        [landsLater.userOpHash, paymaster, true],
        [fresh.userOpHash, paymaster, true],
      ],
    );

    // Past the deadline, but inside the authorization's own hour: only the deadline refuses it.
    await chain.testClient.increaseTime({ seconds: 601 });
    await chain.testClient.mine({ blocks: 1 });
    chainAheadMs = ((await latestTimestampSec(chain)) - Math.floor(Date.now() / 1000)) * 1000;
    // A reading taken before the service's clock jumped is 600 s old to it: read the fees again.
    await t.services.feeOracle.refresh();
    assert.ok((await latestTimestampSec(chain)) < outlivesDeadline.auth.validUntil);
    const refused = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
      outlivesDeadline.userOp,
    ]);
    assert.equal(refused?.reason, "AA32 paymaster expired or not due");

    const later = await mintFor();
    const done = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [later.userOp]);
    assert.equal(bundleEvents(done.logs)[0]?.args.success, true);
  });

  test("an authorization signed by neither key is refused (AA34)", async () => {
    const op = await mintFor();
    const forged = await sponsoredUserOp({
      chain,
      stack: { entryPoint: stack.entryPoint, accountFactory: stack.accountFactory, paymaster },
      owner: randomAccount(),
      signer: randomAccount(),
      target: stack.gameItems,
      data: mintCall,
    });
    const failed = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
      forged.userOp,
    ]);
    assert.equal(failed?.reason, "AA34 signature error");
    // The service's own authorization next to it is still fine.
    assert.equal(
      await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [op.userOp]),
      undefined,
    );
  });
});

/** The key that signed the service's call authorization for `sender`. */
function recoveredSigner(auth: Authorization, sender: Address, initCode: Hex): Promise<Address> {
  const decoded = decodePaymasterAndData(auth.paymasterAndData);
  assert.ok(decoded && decoded.mode === "call");
  const digest = callSponsorshipDigest(
    { chainId: chain.chainId, paymaster: decoded.paymaster },
    decoded.gas,
    {
      sender,
      senderCodeHash: decoded.senderCodeHash,
      initCode,
      target: stack.gameItems,
      selector: MINT_SELECTOR,
      maxTotalGas: decoded.maxTotalGas,
      maxPreVerificationGas: decoded.maxPreVerificationGas,
      maxFeePerGasWei: decoded.maxFeePerGasWei,
      maxPriorityFeePerGasWei: decoded.maxPriorityFeePerGasWei,
      validUntilSec: decoded.validUntilSec,
      validAfterSec: decoded.validAfterSec,
      authId: decoded.authId,
    },
  );
  return recoverAddress({ hash: digest, signature: decoded.signature });
}

describe("rotateSigner on both builds", () => {
  for (const version of ["0.7", "0.8"] as const) {
    const sponsorStack = (paymaster: Address): SponsorStack =>
      version === "0.7"
        ? { entryPoint: stack.entryPoint, accountFactory: stack.accountFactory, paymaster }
        : { ...stack.v08, paymaster };
    const opFor = (
      paymaster: Address,
      overrides: Partial<SponsoredOpParams> & Pick<SponsoredOpParams, "signer">,
    ) =>
      sponsoredUserOp({
        chain,
        stack: sponsorStack(paymaster),
        owner: randomAccount(),
        target: stack.gameItems,
        data: mintCall,
        ...overrides,
      });
    const entryPoint = () => (version === "0.7" ? stack.entryPoint : stack.v08.entryPoint);
    const simulate = (op: SponsoredOp) =>
      simulateHandleOps(chain.publicClient, bundler().account.address, entryPoint(), [op.userOp]);
    /** Mined in a block at exactly `timestampSec`; with a fixed gas limit so a refusal is mined too. */
    const submitAt = async (op: SponsoredOp, timestampSec: number) => {
      await chain.testClient.setNextBlockTimestamp({ timestamp: BigInt(timestampSec) });
      const receipt = await handleOps(chain.publicClient, bundler(), entryPoint(), [op.userOp], {
        gas: 3_000_000n,
      });
      return receipt.status === "success" && bundleEvents(receipt.logs)[0]?.args.success === true;
    };

    test(`v${version}: the previous key is honoured up to its deadline inclusive, in both modes, then refused (AA32); a third key is refused (AA34)`, async () => {
      const oldKey = randomAccount();
      const newKey = randomAccount();
      const paymaster = await deployPaymaster(version, oldKey.address);
      const now = await latestTimestampSec(chain);
      const deadline = now + 600;
      // Issued before the rotation, each with an hour of its own.
      const long = { validUntilSec: now + 3600 };
      const oldKeyOp = (mode: "call" | "operation") =>
        opFor(paymaster, { signer: oldKey, mode, authorization: long });
      const call = await oldKeyOp("call");
      const operation = await oldKeyOp("operation");
      const atDeadline = await oldKeyOp("call");
      const pastDeadline = await oldKeyOp("operation");

      const receipt = await confirm(
        await owner().writeContract({
          address: paymaster,
          abi: sponsorPaymasterAbi,
          functionName: "rotateSigner",
          args: [newKey.address, deadline],
        }),
      );
      const changed = parseEventLogs({ abi: sponsorPaymasterAbi, logs: receipt.logs });
      assert.deepEqual(
        changed.map((e) => [e.eventName, e.args]),
        [
          ["SignerChanged", { previousSigner: oldKey.address, newSigner: newKey.address }],
          ["PreviousSignerChanged", { previousSigner: oldKey.address, validUntil: deadline }],
        ],
      );
      assert.equal(await read(paymaster, "signer"), newKey.address);
      assert.equal(await read(paymaster, "previousSigner"), oldKey.address);
      assert.equal(await read(paymaster, "previousSignerValidUntil"), deadline);

      assert.equal(await simulate(call), undefined);
      assert.equal(await simulate(operation), undefined);
      assert.equal(await submitAt(call, now + 10), true);
      assert.equal(await submitAt(operation, now + 20), true);
      assert.equal(await submitAt(atDeadline, deadline), true, "the deadline itself is still inside");
      assert.equal(await submitAt(pastDeadline, deadline + 1), false, "one second later it is not");
      assert.equal((await simulate(pastDeadline))?.reason, "AA32 paymaster expired or not due");

      // Past the deadline the new key still works and a key that is neither never did.
      assert.equal(
        await simulate(await opFor(paymaster, { signer: newKey, authorization: long })),
        undefined,
      );
      const stranger = await opFor(paymaster, { signer: randomAccount(), authorization: long });
      assert.equal((await simulate(stranger))?.reason, "AA34 signature error");
    });

    test(`v${version}: a previous-key authorization whose own window ends first is bound by its own window`, async () => {
      const oldKey = randomAccount();
      const paymaster = await deployPaymaster(version, oldKey.address);
      const now = await latestTimestampSec(chain);
      const short = await opFor(paymaster, { signer: oldKey, authorization: { validUntilSec: now + 100 } });
      const long = await opFor(paymaster, { signer: oldKey, authorization: { validUntilSec: now + 1000 } });
      await rotate(paymaster, randomAccount().address, now + 600);
      await chain.testClient.setNextBlockTimestamp({ timestamp: BigInt(now + 200) });
      await chain.testClient.mine({ blocks: 1 });
      assert.equal((await simulate(short))?.reason, "AA32 paymaster expired or not due");
      assert.equal(await simulate(long), undefined);
    });

    test(`v${version}: setSigner forgets the previous key at once (a leaked key)`, async () => {
      const oldKey = randomAccount();
      const rotated = randomAccount();
      const replacement = randomAccount();
      const paymaster = await deployPaymaster(version, oldKey.address);
      await rotate(paymaster, rotated.address, (await latestTimestampSec(chain)) + 600);
      const receipt = await confirm(
        await owner().writeContract({
          address: paymaster,
          abi: sponsorPaymasterAbi,
          functionName: "setSigner",
          args: [replacement.address],
        }),
      );
      const forgotten = parseEventLogs({
        abi: sponsorPaymasterAbi,
        logs: receipt.logs,
        eventName: "PreviousSignerChanged",
      });
      assert.deepEqual(forgotten[0]?.args, { previousSigner: zeroAddress, validUntil: 0 });
      assert.equal(await read(paymaster, "previousSigner"), zeroAddress);
      assert.equal(await read(paymaster, "previousSignerValidUntil"), 0);
      for (const key of [oldKey, rotated])
        assert.equal(
          (await simulate(await opFor(paymaster, { signer: key })))?.reason,
          "AA34 signature error",
        );
      assert.equal(await simulate(await opFor(paymaster, { signer: replacement })), undefined);
    });

    test(`v${version}: only the owner rotates, to a new non-zero key, with a deadline after now and within a day`, async () => {
      const current = randomAccount().address;
      const paymaster = await deployPaymaster(version, current);
      const now = await latestTimestampSec(chain);
      const attempt = (args: readonly [Address, number], account = owner().account) =>
        chain.publicClient.simulateContract({
          account,
          address: paymaster,
          abi: sponsorPaymasterAbi,
          functionName: "rotateSigner",
          args,
        });
      const next = randomAccount().address;
      await assert.rejects(
        attempt([next, now + 600], chain.wallets[2]!.account),
        /OwnableUnauthorizedAccount/,
      );
      await assert.rejects(attempt([current, now + 600]), /SameSigner/);
      await assert.rejects(attempt([zeroAddress, now + 600]), /ZeroSigner/);
      await assert.rejects(attempt([next, now - 1]), /InvalidPreviousSignerDeadline/);
      await assert.rejects(attempt([next, now + ONE_DAY_SEC + 60]), /InvalidPreviousSignerDeadline/);
      assert.equal(await read(paymaster, "MAX_PREVIOUS_SIGNER_GRACE"), ONE_DAY_SEC);
      await attempt([next, now + 3600]);
    });
  }

  test("the previous key's path (one more storage read) fits PAYMASTER_GAS_LIMITS with at least 20% headroom", async (t) => {
    const previous = randomAccount();
    const current = randomAccount();
    const paymaster = await deployPaymaster("0.7", previous.address);
    await rotate(paymaster, current.address, (await latestTimestampSec(chain)) + 3600);
    for (const mode of ["call", "operation"] as const) {
      for (const [name, signer] of [
        ["previous", previous],
        ["current", current],
      ] as const) {
        const measured = await measurePaymasterVerificationGas({
          chain,
          stack: { ...stack, paymaster },
          signer,
          owner: randomAccount(),
          target: stack.gameItems,
          data: mintCall,
          mode,
        });
        t.diagnostic(`v0.7 ${mode}, ${name} key: ${measured} gas`);
        assert.ok(
          PAYMASTER_GAS_LIMITS.verificationGasLimit * 100n >= measured * 120n,
          `${mode}, ${name} key: measured ${measured}, limit ${PAYMASTER_GAS_LIMITS.verificationGasLimit}`,
        );
      }
    }
  });
});

/** A SponsorPaymaster build of our own for one test: deployed by wallet 0, funded and staked. */
async function deployPaymaster(version: "0.7" | "0.8", signer: Address): Promise<Address> {
  const artifact = localArtifact(version === "0.7" ? "SponsorPaymaster" : "SponsorPaymasterV08");
  const entryPoint = version === "0.7" ? stack.entryPoint : stack.v08.entryPoint;
  const receipt = await confirm(
    await owner().deployContract({
      abi: artifact.abi,
      bytecode: artifact.bytecode,
      args: [entryPoint, signer],
    }),
  );
  const paymaster = getAddress(receipt.contractAddress!);
  await confirm(
    await owner().writeContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "deposit",
      value: parseEther("1"),
    }),
  );
  await confirm(
    await owner().writeContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "addStake",
      args: [ONE_DAY_SEC],
      value: parseEther("1"),
    }),
  );
  return paymaster;
}

async function rotate(paymaster: Address, signer: Address, deadline: number) {
  await confirm(
    await owner().writeContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "rotateSigner",
      args: [signer, deadline],
    }),
  );
}

async function confirm(hash: Hex) {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success");
  return receipt;
}

function read(
  paymaster: Address,
  functionName: "signer" | "previousSigner" | "previousSignerValidUntil" | "MAX_PREVIOUS_SIGNER_GRACE",
) {
  return chain.publicClient.readContract({
    address: paymaster,
    abi: sponsorPaymasterAbi,
    functionName,
  }) as Promise<Address | number>;
}

/** The operator CLI in this process, with its own environment; lines printed to stdout and stderr. */
async function operatorCli(argv: string[], env: Record<string, string>) {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runCli(argv, env, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { status, out, err };
}
