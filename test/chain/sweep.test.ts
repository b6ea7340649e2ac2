/**
 * Sweeping the funding addresses into the paymaster's EntryPoint deposit, on anvil: three of five
 * addresses derived from a test xpub hold funds (and one only dust), `sweep-plan` lists them with
 * unsigned depositTo transfers, the test signs those with the matching xprv (viem's own HD
 * derivation, independent of the CLI's), `sweep-sign` produces the very same bytes offline,
 * `sweep-send` broadcasts them; the deposit grows by exactly the planned total and every swept
 * address keeps less than one transfer's gas cost. A plan that was tampered with, or a key that
 * is not the plan's, is never signed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HDKey } from "@scure/bip32";
import { type Address, encodeFunctionData, type Hex, parseEther } from "viem";
import { hdKeyToAccount } from "viem/accounts";
import { ACCOUNT_PATH, depositDeriver } from "../../src/funding/derivation.ts";
import { runCli } from "../../src/operator/cli.ts";
import { stakeManagerAbi } from "../../src/operator/paymaster-commands.ts";
import type { SignedSweep, SweepPlan } from "../../src/operator/sweep.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack } from "../support/chain/devnet.ts";
import { paymasterDeposit } from "../support/chain-service.ts";
import { runPaymasterCli } from "../support/operator-cli.ts";
import { randomAccount } from "../support/userop.ts";

/** The key holder's seed; the service and the plan only ever see the account-level xpub. */
const master = HDKey.fromMasterSeed(
  Buffer.from("73776565702d746573742d736565642d6f662d33322d62797465732121212121", "hex"),
);
const account = master.derive(ACCOUNT_PATH);
const xpub = account.publicExtendedKey;
const xprv = account.privateExtendedKey;

/** What each of the five addresses holds before the sweep; index 4 only dust. */
const FUNDED: bigint[] = [parseEther("1"), 0n, parseEther("0.3"), 12_345_678_901_234_567n, 1_000n];

let chain: DevChain;
let stack: DevnetStack;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "sweep-"));
  chain = await startChain();
  stack = await deployStack(chain, { signer: randomAccount().address });
  const deriver = depositDeriver(xpub);
  for (const [index, value] of FUNDED.entries()) {
    if (value === 0n) continue;
    const hash = await chain.wallets[3]!.sendTransaction({ to: deriver.addressAt(index), value });
    await chain.publicClient.waitForTransactionReceipt({ hash });
  }
});

after(async () => {
  await chain?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({
  PATH: process.env.PATH ?? "",
  DATA_DIR: dir,
  CHAIN_14601_RPC_URL: chain.rpcUrl,
  CHAIN_14601_PAYMASTER_ADDRESS: stack.paymaster,
  ...extra,
});

/** The CLI as a child process (the compiled entry point, test/support/operator-cli.ts). */
function paymasterCli(args: string[], extraEnv: Record<string, string> = {}) {
  return runPaymasterCli(args, env(extraEnv));
}

async function inProcess(args: string[], extraEnv: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runCli(args, env(extraEnv), { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { status, stdout: out.join("\n"), stderr: err.join("\n") };
}

/** What the key holder does offline, with viem's HD accounts: sign each transfer as planned. */
async function signWithXprv(plan: SweepPlan): Promise<Hex[]> {
  const signed: Hex[] = [];
  for (const tx of plan.transactions) {
    const key = hdKeyToAccount(master, { path: tx.path as `m/44'/60'/${string}` });
    assert.equal(key.address, tx.from);
    signed.push(
      await key.signTransaction({
        type: "eip1559",
        chainId: tx.chainId,
        nonce: tx.nonce,
        to: tx.to,
        data: tx.data,
        value: BigInt(tx.value),
        gas: BigInt(tx.gas),
        maxFeePerGas: BigInt(tx.maxFeePerGas),
        maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
      }),
    );
  }
  return signed;
}

describe("sweep", () => {
  let plan: SweepPlan;
  let planFile: string;

  test("sweep-plan lists each derived address with its balance and an unsigned depositTo for those above a transfer's gas cost", async () => {
    const run = await paymasterCli(["sweep-plan", "--xpub", xpub, "--count", "5"]);
    assert.equal(run.status, 0, run.stderr);
    plan = JSON.parse(run.stdout);
    planFile = join(dir, "plan.json");
    writeFileSync(planFile, run.stdout);

    const deriver = depositDeriver(xpub);
    assert.deepEqual(
      plan.addresses.map((a) => [a.index, a.path, a.address, a.balance]),
      FUNDED.map((value, i) => [i, `m/44'/60'/0'/0/${i}`, deriver.addressAt(i), value.toString()]),
    );
    // The service's derivation is BIP-44's: viem derives the same addresses from the private side.
    for (const a of plan.addresses)
      assert.equal(hdKeyToAccount(master, { path: a.path as `m/44'/60'/${string}` }).address, a.address);

    const gasCost = BigInt(plan.gas) * BigInt(plan.maxFeePerGas);
    assert.equal(plan.gasCostWei, gasCost.toString());
    assert.ok(gasCost > 1_000n && gasCost < parseEther("0.001"), `gas cost ${gasCost}`);
    const depositTo = encodeFunctionData({
      abi: stakeManagerAbi,
      functionName: "depositTo",
      args: [stack.paymaster],
    });
    assert.deepEqual(
      plan.transactions.map((tx) => [
        tx.index,
        tx.from,
        tx.to,
        tx.data,
        BigInt(tx.value),
        tx.nonce,
        tx.chainId,
        tx.type,
      ]),
      [0, 2, 3].map((i) => [
        i,
        deriver.addressAt(i),
        stack.entryPoint,
        depositTo,
        FUNDED[i]! - gasCost,
        0,
        chain.chainId,
        "eip1559",
      ]),
    );
    for (const tx of plan.transactions) {
      assert.deepEqual(
        [tx.gas, tx.maxFeePerGas, tx.maxPriorityFeePerGas],
        [plan.gas, plan.maxFeePerGas, plan.maxPriorityFeePerGas],
      );
    }
    assert.equal(BigInt(plan.totalValue), FUNDED[0]! + FUNDED[2]! + FUNDED[3]! - 3n * gasCost);
    assert.deepEqual(
      plan.addresses.map((a) => a.swept !== "0"),
      [true, false, true, true, false],
    );
  });

  test("signed with the xprv and sent, the deposit grows by exactly the swept total; each address keeps less than one transfer's gas", async () => {
    const ours = await signWithXprv(plan);
    // sweep-sign (offline, key from SWEEP_XPRV) signs the very same bytes.
    const signRun = await paymasterCli(["sweep-sign", "--plan", planFile, "--paymaster", stack.paymaster], {
      SWEEP_XPRV: xprv,
    });
    assert.equal(signRun.status, 0, signRun.stderr);
    assert.ok(!signRun.stdout.includes(xprv) && !signRun.stderr.includes(xprv));
    const signed: SignedSweep = JSON.parse(signRun.stdout);
    assert.deepEqual(
      signed.transactions.map((tx) => tx.raw),
      ours,
    );
    const signedFile = join(dir, "signed.json");
    writeFileSync(signedFile, signRun.stdout);

    const depositBefore = await paymasterDeposit(chain, stack);
    const sendRun = await paymasterCli(["sweep-send", "--signed", signedFile]);
    assert.equal(sendRun.status, 0, sendRun.stderr);
    const depositAfter = await paymasterDeposit(chain, stack);
    assert.equal(depositAfter - depositBefore, BigInt(plan.totalValue));

    const gasCost = BigInt(plan.gasCostWei);
    for (const tx of signed.transactions) {
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: tx.hash });
      assert.equal(receipt.status, "success");
      const left = await chain.publicClient.getBalance({ address: tx.from });
      // Exactly what the chain did not charge of the reserved gas, and less than one transfer's cost.
      assert.equal(left, FUNDED[tx.index]! - BigInt(tx.value) - receipt.gasUsed * receipt.effectiveGasPrice);
      assert.ok(left < gasCost, `${tx.from} keeps ${left}`);
    }
    // The addresses the plan skipped are untouched.
    for (const a of plan.addresses.filter((x) => x.swept === "0")) {
      assert.equal(await chain.publicClient.getBalance({ address: a.address }), BigInt(a.balance));
    }

    // The next plan finds nothing worth a transfer.
    const again = await inProcess(["sweep-plan", "--xpub", xpub, "--count", "5"]);
    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual((JSON.parse(again.stdout) as SweepPlan).transactions, []);
  });

  test("sweep-sign refuses a plan paying another paymaster, a tampered transfer, and a key that is not the plan's", async () => {
    const attacker = randomAccount().address;
    const sign = (p: SweepPlan, paymaster: Address, key = xprv) => {
      const file = join(dir, `plan-${Math.random().toString(16).slice(2)}.json`);
      writeFileSync(file, JSON.stringify(p));
      return inProcess(["sweep-sign", "--plan", file, "--paymaster", paymaster], { SWEEP_XPRV: key });
    };
    const wrongPaymaster = await sign(plan, attacker);
    assert.equal(wrongPaymaster.status, 1);
    assert.match(wrongPaymaster.stderr, /refusing to sign/);

    const redirected = encodeFunctionData({
      abi: stakeManagerAbi,
      functionName: "depositTo",
      args: [attacker],
    });
    const tampered = {
      ...plan,
      transactions: plan.transactions.map((tx, i) => (i === 1 ? { ...tx, data: redirected } : tx)),
    };
    const run = await sign(tampered, stack.paymaster);
    assert.equal(run.status, 1);
    assert.match(run.stderr, /transaction 2 is not depositTo/);
    const elsewhere = { ...plan, transactions: plan.transactions.map((tx) => ({ ...tx, to: attacker })) };
    assert.equal((await sign(elsewhere, stack.paymaster)).status, 1);

    const otherKey = HDKey.fromMasterSeed(Buffer.alloc(32, 7)).derive(ACCOUNT_PATH).privateExtendedKey;
    const wrongKey = await sign(plan, stack.paymaster, otherKey);
    assert.equal(wrongKey.status, 1);
    assert.match(wrongKey.stderr, /SWEEP_XPRV is not the private half of the plan's xpub/);
    assert.ok(!wrongKey.stderr.includes(otherKey));

    const noKey = await inProcess(["sweep-sign", "--plan", planFile, "--paymaster", stack.paymaster]);
    assert.match(noKey.stderr, /set SWEEP_XPRV/);
    const online = await inProcess(
      ["sweep-sign", "--plan", planFile, "--paymaster", stack.paymaster, "--rpc-url", chain.rpcUrl],
      {
        SWEEP_XPRV: xprv,
      },
    );
    assert.equal(online.status, 2);
    assert.match(online.stderr, /works offline/);
  });

  test("sweep-plan refuses an extended private key given as --xpub (exit 2), without echoing it", async () => {
    const run = await inProcess(["sweep-plan", "--xpub", xprv, "--count", "1"]);
    // A command-line mistake, found before the RPC is asked anything.
    assert.equal(run.status, 2);
    assert.match(run.stderr, /--xpub holds a private key/);
    assert.ok(!run.stderr.includes(xprv) && !run.stdout.includes(xprv));
  });
});
