/**
 * The player as an adversary, on anvil with the real EntryPoint v0.7, SponsorPaymaster v2 and the
 * service's own authorize, fee oracle and settlement watcher. The player controls their
 * account's code (AdversarialAccount), every field of the operation, and is their own bundler
 * and beneficiary. Whatever they do:
 *
 * 1. every wei the paymaster pays on chain is charged to the tank whose authorization was used:
 *    the paymaster's EntryPoint deposit falls by exactly what the tanks were charged, and the
 *    chain parity report shows no unattributed spend;
 * 2. a tank is never charged more than 3× the real on-chain cost of the transaction that carried
 *    the operation, because the authorization binds the gas and both fees to the market.
 *
 * Each attack here broke one of those on the version 1 authorization (issue 7): the
 * prefund-too-low path through handleAggregatedOps or a forwarder went unbilled, and fee
 * extraction took 884× the transaction's cost; issue 19's, at estimatedGas 1,000,000, 10.1× by
 * moving the unused gas into preVerificationGas. The market is held steady: every block the test
 * mines has a 10 gwei base fee (anvil's would otherwise fall towards zero in empty blocks), and
 * anvil suggests a 1 gwei priority fee, a mainnet-like market. The extraction test pins the base
 * fee at 1 gwei instead, the adversary's best: the operation then pays twice per gas what the
 * player's own transaction pays (base fee only, no tip).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import {
  type Address,
  type Hex,
  parseEther,
  parseEventLogs,
  type TransactionReceipt,
  zeroAddress,
} from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import type { SettlementWatcher } from "../../src/settlement/watcher.ts";
import { seedProject, startTestApp, TEST_SIGNER_KEY, type TestApp } from "../support/app.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import {
  adversarialAccountAbi,
  bundleForwarderAbi,
  type DevnetStack,
  deployAdversarialAccount,
  deployBundleForwarder,
} from "../support/chain/devnet.ts";
import {
  type Authorization,
  allowlist,
  authorize,
  balanceOf,
  chainParity,
  MINT_SELECTOR,
  mintCall,
  type Project,
  paymasterDeposit,
  type ServiceOnChain,
  settlementWatcherOn,
  sponsorUnknownAccounts,
  startServiceOnChain,
} from "../support/chain-service.ts";
import { prefundTooLowGas } from "../support/gas-search.ts";
import {
  buildUserOp,
  executeCallData,
  getAccountNonce,
  getUserOpHash,
  simulateHandleOps,
  totalGasLimit,
  type UserOpGas,
} from "../support/userop.ts";

const MARKET_BASE_FEE_WEI = 10_000_000_000n;
const EXTRACTION_AT_1_GWEI = "fee extraction at estimatedGas 1,000,000 and a 1 gwei base fee";
/** The base fee every block the test mines has; the extraction test lowers it to 1 gwei. */
let marketBaseFeeWei = MARKET_BASE_FEE_WEI;
/** What the game's backend asks for a mint: a bundler's estimate with its usual margins. */
const ESTIMATED_GAS = 250_000n;
const OPERATOR = "ops@example.com";
const TANK_WEI = parseEther("5");

type Path = "handleOps" | "handleAggregatedOps" | "forwarder" | "forwarderAggregated";
const PATHS: Path[] = ["handleOps", "handleAggregatedOps", "forwarder", "forwarderAggregated"];

let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let forwarder: Address;
let t: TestApp;
let p: Project;
let settlement: SettlementWatcher;
let depositAtStart: bigint;

/** Every operation the chain ran with our paymaster: what it was charged, and what its transaction cost. */
const landed: { userOpHash: Hex; chargedWei: bigint; txCostWei: bigint; what: string }[] = [];

before(async () => {
  service = await startServiceOnChain({ confirmations: 0, operator: OPERATOR });
  ({ chain, stack, t } = service);
  forwarder = await deployBundleForwarder(chain);
  p = await seedProject(t);
  // AdversarialAccount is hostile code the registry does not know: the project opts in, so these
  // attacks meet only the authorization's caps (the code binding has its own tests, attack-*).
  await sponsorUnknownAccounts(t, p);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, { projectId: p.projectId, reference: "adversarial:tank", amountWei: TANK_WEI });
  settlement = settlementWatcherOn(service, {
    confirmations: 0,
    startBlock: await chain.publicClient.getBlockNumber(),
  });
  depositAtStart = await paymasterDeposit(chain, stack);
});

after(async () => {
  if (process.env.ADVERSARIAL_REPORT) {
    for (const l of landed) {
      const ratio = Number((l.chargedWei * 100n) / (l.txCostWei || 1n)) / 100;
      console.log(`${l.what}: charged ${l.chargedWei} wei, transaction ${l.txCostWei} wei, ${ratio}×`);
    }
  }
  await service?.stop();
});

const attacker = () => chain.wallets[2]!;

/** The next block will have the market's base fee (anvil would lower it after an empty block). */
async function holdMarket(): Promise<void> {
  await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: marketBaseFeeWei });
}

/** The game's backend asks the service, which prices at the market it reads from the chain. */
async function authorizeFor(sender: Address, estimatedGas = ESTIMATED_GAS): Promise<Authorization> {
  await holdMarket();
  await chain.testClient.mine({ blocks: 1 });
  await t.services.feeOracle.refresh();
  return authorize(t, p, { user: sender, target: stack.gameItems, selector: MINT_SELECTOR, estimatedGas });
}

/** The player's own operation, carrying the service's paymasterAndData; the account accepts any signature. */
async function attackerOp(sender: Address, auth: Authorization, gas: UserOpGas) {
  const userOp = buildUserOp({
    sender,
    nonce: await getAccountNonce(chain.publicClient, stack.entryPoint, sender),
    callData: executeCallData(stack.gameItems, mintCall),
    gas,
    paymasterAndData: auth.paymasterAndData,
    signature: "0x",
  });
  return { userOp, userOpHash: await getUserOpHash(chain.publicClient, stack.entryPoint, userOp) };
}

/**
 * Submits a bundle the way the player chooses, as their own bundler and beneficiary, paying
 * only the base fee for the transaction (no tip: the cheapest a transaction can be).
 */
async function submit(path: Path, userOps: PackedUserOperation[]): Promise<TransactionReceipt> {
  await holdMarket();
  const wallet = attacker();
  const beneficiary = wallet.account.address;
  const tx = { maxFeePerGas: marketBaseFeeWei, maxPriorityFeePerGas: 0n, gas: 3_000_000n };
  const groups = [{ userOps, aggregator: zeroAddress, signature: "0x" as Hex }];
  const toEntryPoint = { address: stack.entryPoint, abi: entryPoint07Abi } as const;
  const toForwarder = { address: forwarder, abi: bundleForwarderAbi } as const;
  const hash =
    path === "handleOps"
      ? await wallet.writeContract({
          ...toEntryPoint,
          functionName: "handleOps",
          args: [userOps, beneficiary],
          ...tx,
        })
      : path === "handleAggregatedOps"
        ? await wallet.writeContract({
            ...toEntryPoint,
            functionName: "handleAggregatedOps",
            args: [groups, beneficiary],
            ...tx,
          })
        : path === "forwarder"
          ? await wallet.writeContract({
              ...toForwarder,
              functionName: "forwardHandleOps",
              args: [stack.entryPoint, userOps, beneficiary],
              ...tx,
            })
          : await wallet.writeContract({
              ...toForwarder,
              functionName: "forwardAggregatedOps",
              args: [stack.entryPoint, groups, beneficiary],
              ...tx,
            });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success", `${path} transaction reverted`);
  return receipt;
}

/** Records what the chain charged each operation of a receipt and what the transaction cost. */
function recordLanded(receipt: TransactionReceipt, what: string) {
  const events = parseEventLogs({
    abi: entryPoint07Abi,
    logs: receipt.logs,
    eventName: "UserOperationEvent",
  });
  for (const e of events) {
    landed.push({
      userOpHash: e.args.userOpHash,
      chargedWei: e.args.actualGasCost,
      txCostWei: (receipt.gasUsed * receipt.effectiveGasPrice) / BigInt(events.length),
      what,
    });
  }
  return events;
}

async function newAttackerAccount(revertBytes: bigint): Promise<Address> {
  const account = await deployAdversarialAccount(chain, 0n);
  if (revertBytes > 0n) {
    // One honest operation first: the account's nonce slot is then warm and non-zero, which is
    // what makes the tight limits below land on the prefund-too-low path.
    const auth = await authorizeFor(account);
    const { userOp } = await attackerOp(account, auth, honestGas(auth));
    recordLanded(await submit("handleOps", [userOp]), "warm-up");
    await setRevertBytes(account, revertBytes);
  }
  return account;
}

async function setRevertBytes(account: Address, revertBytes: bigint) {
  const hash = await chain.wallets[0]!.writeContract({
    address: account,
    abi: adversarialAccountAbi,
    functionName: "setRevertBytes",
    args: [revertBytes],
  });
  await chain.publicClient.waitForTransactionReceipt({ hash });
}

/** Gas limits an honest client would use for a mint, at the authorization's fee ceilings. */
function honestGas(auth: Authorization): UserOpGas {
  return {
    verificationGasLimit: 40_000n,
    callGasLimit: 80_000n,
    preVerificationGas: 55_000n,
    maxFeePerGas: BigInt(auth.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
  };
}

async function settleAll() {
  for (let i = 0; i < 3; i++) await settlement.tick();
}

/** Invariant 1: the deposit fell by exactly what the tanks were charged, and nothing is unattributed. */
async function assertEveryWeiBilled() {
  await settleAll();
  const depositDrop = depositAtStart - (await paymasterDeposit(chain, stack));
  const [billed] = await t.db.query<{ billed: string; paid: string }>(
    "SELECT COALESCE(sum(billed), 0)::text AS billed, COALESCE(sum(actual_gas_cost), 0)::text AS paid FROM chain_operations",
  );
  const chargedOnChain = landed.reduce((sum, l) => sum + l.chargedWei, 0n);
  assert.equal(
    BigInt(billed!.paid),
    chargedOnChain,
    "every UserOperationEvent of our paymaster was recorded",
  );
  assert.equal(BigInt(billed!.billed), depositDrop, "the tanks were charged exactly what the deposit paid");
  assert.equal(depositDrop, chargedOnChain);
  // The tank: what was put in, less what was charged, less what is still reserved.
  const [open] = await t.db.query<{ reserved: string }>(
    "SELECT COALESCE(sum(max_gas_cost), 0)::text AS reserved FROM sponsorships WHERE status = 'pending'",
  );
  assert.equal(await balanceOf(t, p), TANK_WEI - depositDrop - BigInt(open!.reserved));
  const parity = await chainParity(t, await t.token(OPERATOR));
  assert.equal(parity.unattributed, "0");
  assert.equal(parity.paidOnChain, depositDrop.toString());
  assert.equal(parity.billed, depositDrop.toString());
  assert.equal(parity.entryPointDeposit, (depositAtStart - depositDrop).toString());
  assert.equal(parity.inSync, true);
}

/** Invariant 2: no operation cost its tank more than 3× its transaction's real cost. */
function assertNoExtraction() {
  // The 1 gwei extraction test has a bound of its own (see there); every other case, 3×.
  for (const l of landed.filter((l) => l.what !== EXTRACTION_AT_1_GWEI)) {
    assert.ok(
      l.chargedWei <= 3n * l.txCostWei,
      `${l.what}: charged ${l.chargedWei} wei for a transaction that cost ${l.txCostWei} wei`,
    );
  }
}

describe("unbilled spend: the prefund-too-low path through every submission path", () => {
  for (const path of PATHS) {
    test(`${path}: a 2 KB revert under tight limits is charged to the tank at the whole prefund`, async () => {
      const account = await newAttackerAccount(2_048n);
      const auth = await authorizeFor(account);
      // Equal fees make the EntryPoint charge exactly maxFeePerGas, the price of the prefund.
      const fees = {
        maxFeePerGas: BigInt(auth.maxPriorityFeePerGas),
        maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
      };
      const gas = await prefundTooLowGas({
        chain,
        stack,
        signer: privateKeyToAccount(TEST_SIGNER_KEY),
        sender: account,
        target: stack.gameItems,
        data: mintCall,
        gas: { verificationGasLimit: 0n, callGasLimit: 0n, preVerificationGas: 50_000n, ...fees },
      });
      assert.ok(
        totalGasLimit(gas, PAYMASTER_GAS_LIMITS) <= ESTIMATED_GAS,
        "the tight limits fit the authorization",
      );
      const { userOp } = await attackerOp(account, auth, gas);
      const receipt = await submit(path, [userOp]);
      const events = recordLanded(receipt, `prefund too low via ${path}`);
      assert.equal(events.length, 1);
      const tooLow = parseEventLogs({
        abi: entryPoint07Abi,
        logs: receipt.logs,
        eventName: "UserOperationPrefundTooLow",
      });
      assert.equal(tooLow.length, 1, "the EntryPoint took its prefund-too-low path");
      await assertEveryWeiBilled();
      const [row] = await t.db.query<{ billed: string; prefund_too_low: boolean }>(
        "SELECT billed::text, prefund_too_low FROM chain_operations WHERE user_op_hash = decode(substr($1, 3), 'hex')",
        [events[0]!.args.userOpHash.toLowerCase()],
      );
      assert.equal(row?.prefund_too_low, true);
      assert.equal(BigInt(row!.billed), events[0]!.args.actualGasCost);
    });
  }
});

describe("fee extraction: the player as their own bundler and beneficiary", () => {
  // Issue 19's goal is 3× here. What stands in the way (README, "What the allowlist binds"): at a
  // 1 gwei base fee with anvil's 1 gwei priority fee the operation pays 2× per gas what the
  // player's tip-less transaction pays, and the EntryPoint's 10% penalty on ~830,000 unused
  // call gas (~83,000 gas, paid to the player) is bounded by nothing but an honest estimatedGas.
  // Before the preVerificationGas ceiling this case cost the tank 10.1×.
  test("at estimatedGas 1,000,000 and a 1 gwei base fee, the highest fees, preVerificationGas and unused gas the authorization allows cost the tank at most 3.2× the transaction", async (ctx) => {
    marketBaseFeeWei = 1_000_000_000n;
    ctx.after(() => {
      marketBaseFeeWei = MARKET_BASE_FEE_WEI;
    });
    const account = await newAttackerAccount(0n);
    // A game backend with a generous margin: the mint uses a fifth of it.
    const auth = await authorizeFor(account, 1_000_000n);
    const gas: UserOpGas = {
      verificationGasLimit: 30_000n,
      callGasLimit: 0n,
      // Charged in full whatever the operation costs the bundle: as high as the ceiling allows.
      preVerificationGas: BigInt(auth.maxPreVerificationGas),
      maxFeePerGas: BigInt(auth.maxFeePerGas),
      maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
    };
    // The rest of the ceiling goes to callGasLimit, where the EntryPoint charges 10% of what is
    // left unused (and pays it to the beneficiary, the player).
    gas.callGasLimit = BigInt(auth.maxTotalGas) - totalGasLimit(gas, PAYMASTER_GAS_LIMITS);
    const { userOp } = await attackerOp(account, auth, gas);
    const before = await balanceOf(t, p);
    const receipt = await submit("handleOps", [userOp]);
    const [event] = recordLanded(receipt, EXTRACTION_AT_1_GWEI);
    await assertEveryWeiBilled();
    const charged = before + BigInt(auth.maxGasCost) - (await balanceOf(t, p));
    assert.equal(charged, event!.args.actualGasCost, "the tank paid exactly what the EntryPoint charged");
    const txCost = receipt.gasUsed * receipt.effectiveGasPrice;
    console.log(
      `# extraction at estimatedGas 1,000,000: transaction ${receipt.gasUsed} gas at ${receipt.effectiveGasPrice} wei, tank charged ${charged} wei = ${Number((charged * 1000n) / txCost) / 1000}× (preVerificationGas ${gas.preVerificationGas}, callGasLimit ${gas.callGasLimit})`,
    );
    assert.ok(charged * 10n <= 32n * txCost, `charged ${charged} for a transaction that cost ${txCost}`);
  });

  test("one wei above any ceiling is refused on chain (AA34) and costs nothing", async () => {
    const account = await newAttackerAccount(0n);
    const auth = await authorizeFor(account);
    const honest = honestGas(auth);
    const room = BigInt(auth.maxTotalGas) - totalGasLimit(honest, PAYMASTER_GAS_LIMITS);
    const variants: [string, UserOpGas][] = [
      ["maxFeePerGas", { ...honest, maxFeePerGas: honest.maxFeePerGas + 1n }],
      ["maxPriorityFeePerGas", { ...honest, maxPriorityFeePerGas: honest.maxPriorityFeePerGas + 1n }],
      ["total gas", { ...honest, callGasLimit: honest.callGasLimit + room + 1n }],
      // Within the total (callGasLimit gives up what preVerificationGas takes), one above its own ceiling.
      [
        "preVerificationGas",
        {
          ...honest,
          preVerificationGas: BigInt(auth.maxPreVerificationGas) + 1n,
          callGasLimit:
            honest.callGasLimit - (BigInt(auth.maxPreVerificationGas) + 1n - honest.preVerificationGas),
        },
      ],
    ];
    const depositBefore = await paymasterDeposit(chain, stack);
    for (const [what, gas] of variants) {
      const { userOp } = await attackerOp(account, auth, gas);
      const refused = await simulateHandleOps(
        chain.publicClient,
        attacker().account.address,
        stack.entryPoint,
        [userOp],
      );
      assert.match(refused?.reason ?? "", /AA34/, `${what} above its ceiling`);
    }
    assert.equal(await paymasterDeposit(chain, stack), depositBefore);
  });
});

describe("not yet due: a bundler simulating at the latest block", () => {
  test("accepts an authorization made while the chain's clock trails the service's by 30 s", async () => {
    const ahead = await startTestApp({
      db: { db: t.db, schema: null, drop: async () => {} },
      env: { CHAIN_14601_RPC_URL: chain.rpcUrl, CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster },
      feeOracle: "chain",
      now: () => Date.now() + 30_000,
    });
    try {
      const account = await deployAdversarialAccount(chain, 0n);
      await holdMarket();
      await chain.testClient.mine({ blocks: 1 });
      await ahead.services.feeOracle.refresh();
      const res = await ahead.request({
        method: "POST",
        url: "/sponsor/authorize",
        token: p.apiKey,
        payload: {
          projectId: p.projectId,
          user: account,
          target: stack.gameItems,
          selector: MINT_SELECTOR,
          estimatedGas: Number(ESTIMATED_GAS),
          chainId: chain.chainId,
        },
      });
      assert.equal(res.statusCode, 200, res.body);
      const auth: Authorization = res.json();
      const latest = await chain.publicClient.getBlock({ blockTag: "latest" });
      assert.ok(auth.validAfter <= Number(latest.timestamp), "validAfter is not later than the latest block");
      const { userOp } = await attackerOp(account, auth, honestGas(auth));
      assert.equal(
        await simulateHandleOps(chain.publicClient, attacker().account.address, stack.entryPoint, [userOp]),
        undefined,
      );
    } finally {
      await ahead.close();
    }
  });
});

describe("property: adversarial operations over fees, gas limits, revert data and submission paths", () => {
  test("every wei paid is billed, and no tank pays more than 3× a transaction's cost", async () => {
    const accounts = new Map<bigint, Address>();
    const accountFor = async (revertBytes: bigint) => {
      let a = accounts.get(revertBytes);
      if (!a) {
        a = await newAttackerAccount(0n);
        await setRevertBytes(a, revertBytes);
        accounts.set(revertBytes, a);
      }
      return a;
    };
    const attack = fc.record({
      path: fc.constantFrom(...PATHS),
      revertBytes: fc.constantFrom(0n, 256n, 2_048n, 4_096n),
      // Fractions (in %) of the ceilings; above 100 breaks the ceiling.
      maxFeePct: fc.integer({ min: 0, max: 101 }),
      priorityPct: fc.integer({ min: 0, max: 101 }),
      verificationGas: fc.bigInt(5_000n, 120_000n),
      callGas: fc.bigInt(0n, 150_000n),
      pvgShare: fc.integer({ min: 0, max: 101 }),
    });
    await fc.assert(
      fc.asyncProperty(attack, async (a) => {
        const account = await accountFor(a.revertBytes);
        const auth = await authorizeFor(account);
        const pct = (wei: string, percent: number) => (BigInt(wei) * BigInt(percent)) / 100n;
        const maxFeePerGas = pct(auth.maxFeePerGas, a.maxFeePct);
        const gas: UserOpGas = {
          verificationGasLimit: a.verificationGas,
          callGasLimit: a.callGas,
          preVerificationGas: 0n,
          maxFeePerGas,
          maxPriorityFeePerGas: minBig(pct(auth.maxPriorityFeePerGas, a.priorityPct), maxFeePerGas),
        };
        const room = BigInt(auth.maxTotalGas) - totalGasLimit(gas, PAYMASTER_GAS_LIMITS);
        gas.preVerificationGas = room > 0n ? (room * BigInt(a.pvgShare)) / 100n : 0n;
        const { userOp } = await attackerOp(account, auth, gas);
        const refused = await simulateHandleOps(
          chain.publicClient,
          attacker().account.address,
          stack.entryPoint,
          [userOp],
        );
        if (refused === undefined)
          recordLanded(await submit(a.path, [userOp]), `property ${JSON.stringify(a, big)}`);
        await assertEveryWeiBilled();
        assertNoExtraction();
      }),
      { numRuns: Number(process.env.ADVERSARIAL_RUNS ?? 24) },
    );
  });
});

function minBig(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

function big(_key: string, value: unknown) {
  return typeof value === "bigint" ? value.toString() : value;
}
