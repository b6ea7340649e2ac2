/**
 * Both EntryPoints live on one chain: the configuration names the v0.7 and v0.8 pairs, the
 * service runs one settlement watcher per pair ("settlement" and "settlement:0.8", each with its
 * own cursor), and each charges its tanks exactly the actualGasCost its own EntryPoint reported,
 * here for a SimpleAccount operation (call authorization) and an EIP-7702 Simple7702Account
 * operation (whole-operation authorization) on v0.8 beside a v0.7 one. A watcher releases only
 * its own paymaster's expired reservations. The chain list, the operators' parity report and
 * readiness show both pairs.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Address,
  encodeFunctionData,
  type Hex,
  type LocalAccount,
  parseEther,
  parseEventLogs,
  slice,
} from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { readCursor } from "../../src/chains/cursors.ts";
import { type ChainWatchers, createChainWatchers } from "../../src/chains/watchers.ts";
import { creditDeposit, reserve } from "../../src/ledger/ledger.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import type { PaymasterMode } from "../../src/paymaster/layout.ts";
import { type DevChain, type DevnetStack, deployStack, startChain } from "../support/anvil.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import { gameItemsAbi } from "../support/chain/devnet.ts";
import { allowlist, balanceOf, chainParity, type Project } from "../support/chain-service.ts";
import {
  devnetUserOpGas,
  handleOps,
  latestTimestampSec,
  randomAccount,
  randomAuthId,
  requiredPrefundWei,
  type SponsorStack,
  signDelegation,
  sponsoredUserOp,
  totalGasLimit,
} from "../support/userop.ts";

const OPERATOR = "operator@example.com";
const TANK_WEI = parseEther("5");
const mintCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [9n] });
const MINT_SELECTOR = slice(mintCall, 0, 4);

let chain: DevChain;
let stack: DevnetStack;
let t: TestApp;
let p: Project;
let watchers: ChainWatchers;
const signer = privateKeyToAccount(TEST_SIGNER_KEY);

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });
  t = await startTestApp({
    env: {
      CHAIN_14601_RPC_URL: chain.rpcUrl,
      CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
      CHAIN_14601_PAYMASTER_V08_ADDRESS: stack.v08.paymaster,
      CHAIN_14601_CONFIRMATIONS: "0",
      OPERATOR_EMAILS: OPERATOR,
    },
  });
  p = await seedProject(t);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, { projectId: p.projectId, reference: "v08:tank", amountWei: TANK_WEI });
  watchers = createChainWatchers(t.config, t.db);
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

const pairs = () => watchers.chains[0]!.settlements;
const watcherOf = (version: "0.7" | "0.8") => pairs().find((s) => s.version === version)!.watcher;

/**
 * An authorization reserved in the project's tank the way the service reserves one (for the
 * paymaster of `target`'s EntryPoint, its maxGasCost the operation's prefund), then the operation
 * it authorizes, signed by the service's key.
 */
async function reservedOp(options: {
  target: SponsorStack;
  mode: PaymasterMode;
  owner?: LocalAccount;
  eip7702?: { account: LocalAccount; delegate: Address };
  validitySec?: number;
}) {
  const nowSec = await latestTimestampSec(chain);
  const authId = randomAuthId();
  const window = { validAfterSec: nowSec - 60, validUntilSec: nowSec + (options.validitySec ?? 300) };
  const sender = options.eip7702?.account.address ?? null;
  const op = await sponsoredUserOp({
    chain,
    stack: options.target,
    signer,
    target: stack.gameItems,
    data: mintCall,
    mode: options.mode,
    ...(options.eip7702 ? { eip7702: options.eip7702 } : { owner: options.owner ?? randomAccount() }),
    authorization: { authId, ...window },
  });
  const outcome = await reserve(t.db, {
    projectId: p.projectId,
    clientNonce: null,
    requestDigest: null,
    authId: authId.toLowerCase(),
    apiKeyId: null,
    chainId: chain.chainId,
    sender: (sender ?? op.sender).toLowerCase(),
    target: stack.gameItems.toLowerCase(),
    selector: MINT_SELECTOR,
    estimatedGas: totalGasLimit(devnetUserOpGas, PAYMASTER_GAS_LIMITS),
    maxGasCostWei: requiredPrefundWei(devnetUserOpGas, PAYMASTER_GAS_LIMITS),
    maxFeePerGasWei: devnetUserOpGas.maxFeePerGas,
    maxPriorityFeePerGasWei: devnetUserOpGas.maxPriorityFeePerGas,
    paymaster: options.target.paymaster.toLowerCase(),
    ...window,
    response: null,
    requestedAtMs: Date.now(),
    ...(options.mode === "operation"
      ? { calls: [{ target: stack.gameItems.toLowerCase(), selector: MINT_SELECTOR }] }
      : {}),
  });
  assert.deepEqual(outcome, { kind: "reserved" });
  return op;
}

async function sponsorshipRow(authId: Hex) {
  const [row] = await t.db.query<{ status: string; actual_gas_cost: string; paymaster: string }>(
    "SELECT status, actual_gas_cost::text, paymaster FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
    [authId.toLowerCase()],
  );
  return row;
}

describe("one settlement watcher per live (EntryPoint, paymaster) pair", () => {
  test("the configuration's two live pairs get watchers named settlement and settlement:0.8, and readiness probes", () => {
    assert.deepEqual(
      pairs().map((s) => [s.version, s.name, s.entryPoint, s.paymaster]),
      [
        ["0.7", "settlement", stack.entryPoint, stack.paymaster],
        ["0.8", "settlement:0.8", stack.v08.entryPoint, stack.v08.paymaster],
      ],
    );
    // Callers from before v0.8 still find the v0.7 watcher where it was.
    assert.equal(watchers.chains[0]!.settlement, watcherOf("0.7"));
    const names = watchers.probes.map((probe) => probe.name);
    for (const name of [
      "chain:14601:settlement",
      "chain:14601:settlement:0.8",
      "chain:14601:unattributed",
      "chain:14601:unattributed:0.8",
      "chain:14601:deposits",
    ])
      assert.ok(names.includes(name), name);
  });

  test("each watcher charges exactly the actualGasCost its own EntryPoint reported, under its own cursor", async () => {
    const before = await balanceOf(t, p);
    const simple = await reservedOp({ target: stack.v08, mode: "call" });
    const eoa = randomAccount();
    const eip7702 = { account: eoa, delegate: stack.v08.simple7702Account };
    const delegated = await reservedOp({ target: stack.v08, mode: "operation", eip7702 });
    const v07 = await reservedOp({ target: stack, mode: "call" });

    const authorization = await signDelegation(chain.publicClient, eoa, stack.v08.simple7702Account);
    const v08Receipt = await handleOps(
      chain.publicClient,
      chain.wallets[1]!,
      stack.v08.entryPoint,
      [simple.userOp, delegated.userOp],
      {
        authorizationList: [authorization],
      },
    );
    const v07Receipt = await handleOps(chain.publicClient, chain.wallets[1]!, stack.entryPoint, [v07.userOp]);
    const costs = new Map<string, bigint>();
    for (const receipt of [v08Receipt, v07Receipt]) {
      assert.equal(receipt.status, "success");
      const events = parseEventLogs({
        abi: entryPoint08Abi,
        logs: receipt.logs,
        eventName: "UserOperationEvent",
      });
      for (const { args } of events) {
        assert.equal(args.success, true);
        costs.set(args.userOpHash, args.actualGasCost);
      }
    }
    assert.equal(costs.size, 3);

    const v08Report = await watcherOf("0.8").tick();
    assert.equal(v08Report.settled, 2);
    assert.equal(v08Report.unattributed, 0);
    for (const op of [simple, delegated]) {
      assert.deepEqual(await sponsorshipRow(op.authId), {
        status: "success",
        actual_gas_cost: costs.get(op.userOpHash)!.toString(),
        paymaster: stack.v08.paymaster.toLowerCase(),
      });
    }
    // The v0.7 operation is in the other EntryPoint's logs: still pending until its own watcher runs.
    assert.equal((await sponsorshipRow(v07.authId))?.status, "pending");
    const v08Spent = costs.get(simple.userOpHash)! + costs.get(delegated.userOpHash)!;
    const reservedV07 = requiredPrefundWei(devnetUserOpGas, PAYMASTER_GAS_LIMITS);
    assert.equal(before - (await balanceOf(t, p)), v08Spent + reservedV07);

    const v07Report = await watcherOf("0.7").tick();
    assert.equal(v07Report.settled, 1);
    assert.equal((await sponsorshipRow(v07.authId))?.actual_gas_cost, costs.get(v07.userOpHash)!.toString());
    assert.equal(before - (await balanceOf(t, p)), v08Spent + costs.get(v07.userOpHash)!);

    // Two cursors, each at the head; ticking again charges nothing twice.
    const head = await chain.publicClient.getBlockNumber();
    assert.equal(await readCursor(t.db, chain.chainId, "settlement:0.8"), head + 1n);
    assert.equal(await readCursor(t.db, chain.chainId, "settlement"), head + 1n);
    assert.equal((await watcherOf("0.8").tick()).settled, 0);
    assert.equal((await watcherOf("0.7").tick()).settled, 0);
    assert.equal(before - (await balanceOf(t, p)), v08Spent + costs.get(v07.userOpHash)!);
  });

  test("a watcher releases only its own paymaster's expired reservations", async () => {
    const unusedV08 = await reservedOp({ target: stack.v08, mode: "operation", validitySec: 30 });
    await chain.testClient.increaseTime({ seconds: 200 });
    await chain.testClient.mine({ blocks: 1 });
    // v0.7's watcher has read past validUntil + margin, but v0.8's authorization is not its to judge.
    assert.equal((await watcherOf("0.7").tick()).released, 0);
    assert.equal((await sponsorshipRow(unusedV08.authId))?.status, "pending");
    assert.equal((await watcherOf("0.8").tick()).released, 1);
    assert.equal((await sponsorshipRow(unusedV08.authId))?.status, "expired");
  });
});

describe("the chain list, parity and readiness show both pairs", () => {
  test("GET /blockchain/chains lists both EntryPoints with their paymasters; the old fields are v0.7's", async () => {
    const res = await t.request({ method: "GET", url: "/blockchain/chains" });
    assert.equal(res.statusCode, 200, res.body);
    const [listed] = res.json();
    assert.equal(listed.entryPoint, stack.entryPoint);
    assert.equal(listed.paymaster, stack.paymaster);
    assert.deepEqual(listed.entryPoints, [
      { version: "0.7", entryPoint: stack.entryPoint, paymaster: stack.paymaster },
      { version: "0.8", entryPoint: stack.v08.entryPoint, paymaster: stack.v08.paymaster },
    ]);
  });

  test("chain parity reports each paymaster (deposit, paid, billed) and both deposits against the tanks; in sync", async () => {
    const parity = (await chainParity(t, await t.token(OPERATOR))) as unknown as ParityWithPairs;
    assert.equal(parity.paymaster, stack.paymaster);
    assert.deepEqual(
      parity.entryPoints.map((e) => [e.version, e.entryPoint, e.paymaster]),
      [
        ["0.7", stack.entryPoint, stack.paymaster],
        ["0.8", stack.v08.entryPoint, stack.v08.paymaster],
      ],
    );
    const v08 = parity.entryPoints[1]!;
    assert.equal(v08.operations, 2);
    assert.equal(v08.paidOnChain, v08.billed);
    assert.equal(v08.unattributed, "0");
    const depositV08 = await chain.publicClient.readContract({
      address: stack.v08.entryPoint,
      abi: entryPoint08Abi,
      functionName: "balanceOf",
      args: [stack.v08.paymaster],
    });
    assert.equal(v08.entryPointDeposit, depositV08.toString());
    assert.equal(parity.entryPoints[0]!.entryPointDeposit, parity.entryPointDeposit);
    assert.equal(parity.entryPointDeposits, (BigInt(parity.entryPointDeposit!) + depositV08).toString());
    assert.equal(parity.operations, 1);
    assert.equal(parity.inSync, true);
  });

  test("readiness: both settlement watchers at the head, no unattributed spend on either paymaster", async () => {
    for (const name of ["chain:14601:settlement", "chain:14601:settlement:0.8"]) {
      const probe = watchers.probes.find((x) => x.name === name)!;
      const health = await probe.check();
      // The loops are not running (the test ticks by hand), so only the lag is read here.
      assert.match(health.detail ?? "", /^0 blocks behind the confirmed head/, name);
    }
    const unattributed = await watchers.probes
      .find((x) => x.name === "chain:14601:unattributed:0.8")!
      .check();
    assert.deepEqual(unattributed, { status: "ok", detail: "2 paid operations, all charged to gas tanks" });
  });
});

interface ParityWithPairs {
  paymaster: string;
  entryPointDeposit: string | null;
  entryPointDeposits: string | null;
  operations: number;
  inSync: boolean;
  entryPoints: {
    version: string;
    entryPoint: string;
    paymaster: string;
    entryPointDeposit: string | null;
    operations: number;
    paidOnChain: string;
    billed: string;
    unattributed: string;
  }[];
}
