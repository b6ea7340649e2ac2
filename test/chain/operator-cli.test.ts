// test-scope: store-free — the CLI reads only the settings each test gives it, never the run's store.
/**
 * The operator CLI (`npm run paymaster -- …`) end to end: each command runs as a child process
 * (the compiled entry point, dist/operator/main.js) against anvil with the real EntryPoints v0.7 and v0.8, and the
 * test reads the chain after each one. It deploys both builds, funds and stakes them, checks a
 * healthy and a broken deployment, changes and rotates the signer, withdraws, and takes the stake
 * back; every expected failure is one line with a non-zero status, and the operator's key never
 * appears in any output. The quick refusals (usage, a missing key) run in process through the same
 * runCli the script calls, which saves a tsx start-up each.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Address, getAddress, type Hex, parseAbi, parseEther, zeroAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { runCli } from "../../src/operator/cli.ts";
import { stakeManagerAbi } from "../../src/operator/paymaster-commands.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { type DevnetStack, deployStack, sponsorPaymasterAbi } from "../support/chain/devnet.ts";
import { type CliRun, runPaymasterCli } from "../support/operator-cli.ts";
import { randomAccount } from "../support/userop.ts";

const ONE_DAY_SEC = 86_400;

const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey).address;
const serviceKey = generatePrivateKey();
const serviceSigner = privateKeyToAccount(serviceKey).address;

let chain: DevChain;
let stack: DevnetStack;
/** Set by the deploy tests: the two paymasters the CLI deployed. */
let v07: Address;
let v08: Address;
/** An empty data directory: no signer key there, so check compares with SIGNER_PRIVATE_KEY. */
let dataDir: string;
/** Every line any run printed, to prove no key ever reached a terminal. */
const printed: string[] = [];

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "paymaster-cli-"));
  chain = await startChain();
  // For its EntryPoints at their canonical addresses; the CLI deploys its own paymasters.
  stack = await deployStack(chain, { signer: randomAccount().address });
  await chain.testClient.setBalance({ address: operator, value: parseEther("100") });
});

after(async () => {
  await chain?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

type Run = CliRun;

/**
 * `npm run paymaster -- <args>` as a child process, with an environment of its own: the chain's
 * RPC, an empty DATA_DIR, the operator's key and the service's signer key, unless overridden.
 */
async function paymasterCli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const run = await runPaymasterCli(args, commandEnv(env));
  printed.push(run.stdout, run.stderr);
  return run;
}

function commandEnv(env: Record<string, string | undefined>): Record<string, string> {
  const fullEnv: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    DATA_DIR: dataDir,
    CHAIN_14601_RPC_URL: chain.rpcUrl,
    OPERATOR_PRIVATE_KEY: operatorKey,
    SIGNER_PRIVATE_KEY: serviceKey,
  };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete fullEnv[name];
    else fullEnv[name] = value;
  }
  return fullEnv;
}

/** The same command through runCli in this process (no tsx start-up): for the quick refusals. */
async function inProcess(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const status = await runCli(args, commandEnv(env), { out: (l) => out.push(l), err: (l) => err.push(l) });
  const stdout = out.map((l) => `${l}\n`).join("");
  const stderr = err.map((l) => `${l}\n`).join("");
  printed.push(stdout, stderr);
  return { status, stdout, stderr, last: out[out.length - 1] ?? "" };
}

/** One line on stderr, starting "error:", and no stack trace. */
function assertOneLineError(run: Run, status: number, pattern: RegExp) {
  assert.equal(run.status, status, run.stderr);
  const lines = run.stderr.trim().split("\n");
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0]!, /^error: /);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(run.stderr, /\n\s+at /);
}

const read = (address: Address, functionName: "signer" | "owner" | "entryPoint" | "previousSigner") =>
  chain.publicClient.readContract({ address, abi: sponsorPaymasterAbi, functionName }) as Promise<Address>;

const depositInfo = (entryPoint: Address, paymaster: Address) =>
  chain.publicClient.readContract({
    address: entryPoint,
    abi: stakeManagerAbi,
    functionName: "getDepositInfo",
    args: [paymaster],
  });

describe("deploy", () => {
  test("--entry-point v0.7 deploys SponsorPaymaster and prints its address and the settings line", async () => {
    const run = await paymasterCli(["deploy", "--entry-point", "v0.7", "--signer", serviceSigner]);
    assert.equal(run.status, 0, run.stderr);
    const match = /^CHAIN_14601_PAYMASTER_ADDRESS=(0x[0-9a-fA-F]{40})$/.exec(run.last);
    assert.ok(match, run.stdout);
    v07 = getAddress(match[1]!);
    assert.match(run.stdout, new RegExp(`^paymaster ${v07}$`, "m"));
    assert.equal(await read(v07, "entryPoint"), stack.entryPoint);
    assert.equal(await read(v07, "signer"), serviceSigner);
    assert.equal(await read(v07, "owner"), operator);
  });

  test("--entry-point v0.8 deploys SponsorPaymasterV08 for EntryPoint v0.8, with its own settings line", async () => {
    const run = await paymasterCli(["deploy", "--entry-point", "v0.8", "--signer", serviceSigner]);
    assert.equal(run.status, 0, run.stderr);
    const match = /^CHAIN_14601_PAYMASTER_V08_ADDRESS=(0x[0-9a-fA-F]{40})$/.exec(run.last);
    assert.ok(match, run.stdout);
    v08 = getAddress(match[1]!);
    assert.equal(await read(v08, "entryPoint"), stack.v08.entryPoint);
    assert.equal(await read(v08, "signer"), serviceSigner);
    assert.equal(await read(v08, "owner"), operator);
  });

  test("--owner hands v0.7 over at once, and offers v0.8 (Ownable2Step) until the new owner accepts", async () => {
    const newOwner = randomAccount().address;
    const a = await paymasterCli([
      "deploy",
      "--entry-point",
      "0.7",
      "--signer",
      serviceSigner,
      "--owner",
      newOwner,
    ]);
    assert.equal(a.status, 0, a.stderr);
    const first = getAddress(a.last.split("=")[1]!);
    assert.equal(await read(first, "owner"), newOwner);

    const b = await paymasterCli([
      "deploy",
      "--entry-point",
      "v0.8",
      "--signer",
      serviceSigner,
      "--owner",
      newOwner,
    ]);
    assert.equal(b.status, 0, b.stderr);
    const second = getAddress(b.last.split("=")[1]!);
    assert.equal(await read(second, "owner"), operator);
    const pendingOwner = await chain.publicClient.readContract({
      address: second,
      abi: parseAbi(["function pendingOwner() view returns (address)"]),
      functionName: "pendingOwner",
    });
    assert.equal(pendingOwner, newOwner);
    assert.match(b.stderr, /acceptOwnership/);
  });
});

describe("funding and checking", () => {
  test("deposit and stake put exactly the amounts given into each paymaster's EntryPoint", async () => {
    // v0.7 through its setting, v0.8 through the flags.
    const env07 = { CHAIN_14601_PAYMASTER_ADDRESS: v07 };
    const flags08 = ["--entry-point", "v0.8", "--paymaster", v08];
    const runs = [
      await paymasterCli(["deposit", "--amount", "0.5ether"], env07),
      await paymasterCli(["stake", "--amount", "1ether", "--unstake-delay", String(ONE_DAY_SEC)], env07),
      await paymasterCli(["deposit", "--amount", "250000000000000000", ...flags08]),
      await paymasterCli([
        "stake",
        "--amount",
        "2ether",
        "--unstake-delay",
        String(2 * ONE_DAY_SEC),
        ...flags08,
      ]),
    ];
    for (const run of runs) assert.equal(run.status, 0, run.stderr);
    const a = await depositInfo(stack.entryPoint, v07);
    assert.deepEqual(
      [a.deposit, a.staked, a.stake, a.unstakeDelaySec, a.withdrawTime],
      [parseEther("0.5"), true, parseEther("1"), ONE_DAY_SEC, 0],
    );
    const b = await depositInfo(stack.v08.entryPoint, v08);
    assert.deepEqual(
      [b.deposit, b.staked, b.stake, b.unstakeDelaySec, b.withdrawTime],
      [parseEther("0.25"), true, parseEther("2"), 2 * ONE_DAY_SEC, 0],
    );
    assert.match(runs[0]!.last, /deposit is now 0\.5 S \(500000000000000000 wei\)/);
  });

  test("check prints OK and exits 0 for each funded, staked paymaster whose signer is SIGNER_PRIVATE_KEY's", async () => {
    const a = await paymasterCli(["check"], { CHAIN_14601_PAYMASTER_ADDRESS: v07 });
    assert.equal(a.status, 0, a.stdout + a.stderr);
    assert.equal(a.last, "OK");
    assert.match(
      a.stdout,
      new RegExp(`OK {4}signer\\(\\) is ${serviceSigner}, the address of SIGNER_PRIVATE_KEY`),
    );
    const b = await paymasterCli(["check", "--entry-point", "v0.8"], {
      CHAIN_14601_PAYMASTER_V08_ADDRESS: v08,
    });
    assert.equal(b.status, 0, b.stdout + b.stderr);
    assert.equal(b.last, "OK");
  });

  test("check exits 1 and names what is wrong: another signer, another EntryPoint, no funds, no contract", async () => {
    const other = privateKeyToAccount(generatePrivateKey()).address;
    const wrongSigner = await paymasterCli(["check", "--paymaster", v07, "--signer", other]);
    assertOneLineError(wrongSigner, 1, /check failed: 1 problem$/);
    assert.match(
      wrongSigner.stdout,
      new RegExp(`FAIL  signer\\(\\) is ${serviceSigner}, but --signer is ${other}`),
    );
    assert.doesNotMatch(wrongSigner.stdout, /^OK$/m);

    const wrongKey = await paymasterCli(["check", "--paymaster", v07], {
      SIGNER_PRIVATE_KEY: generatePrivateKey(),
    });
    assert.equal(wrongKey.status, 1);
    assert.match(wrongKey.stdout, /FAIL {2}signer\(\) is .* but SIGNER_PRIVATE_KEY is 0x/);

    const wrongEntryPoint = await paymasterCli(["check", "--entry-point", "v0.8", "--paymaster", v07]);
    assert.equal(wrongEntryPoint.status, 1);
    assert.match(
      wrongEntryPoint.stdout,
      new RegExp(
        `FAIL {2}entryPoint\\(\\) is ${stack.entryPoint}, but the configured EntryPoint v0.8 is ${stack.v08.entryPoint}`,
      ),
    );

    const bare = await paymasterCli(["deploy", "--entry-point", "v0.7", "--signer", serviceSigner]);
    const unfunded = await paymasterCli(["check", "--paymaster", bare.last.split("=")[1]!]);
    assertOneLineError(unfunded, 1, /check failed: 2 problems$/);
    assert.match(unfunded.stdout, /FAIL {2}deposit 0 S is below/);
    assert.match(unfunded.stdout, /FAIL {2}not staked/);

    const nothing = await paymasterCli(["check", "--paymaster", randomAccount().address]);
    assert.equal(nothing.status, 1);
    assert.match(nothing.stdout, /FAIL {2}no contract at 0x/);
  });
});

describe("signer", () => {
  test("set-signer replaces the signer; check passes once SIGNER_PRIVATE_KEY is the new key", async () => {
    const nextKey = generatePrivateKey();
    const next = privateKeyToAccount(nextKey).address;
    const run = await paymasterCli(["set-signer", next, "--paymaster", v07]);
    assert.equal(run.status, 0, run.stderr);
    assert.equal(await read(v07, "signer"), next);
    assert.equal(await read(v07, "previousSigner"), zeroAddress);
    assert.equal((await paymasterCli(["check", "--paymaster", v07])).status, 1);
    const ok = await paymasterCli(["check", "--paymaster", v07], { SIGNER_PRIVATE_KEY: nextKey });
    assert.equal(ok.last, "OK", ok.stdout);
  });

  test("rotate-signer keeps the previous signer for --previous-valid-for seconds of chain time; check flags a service still on it", async () => {
    const before = await chain.publicClient.readContract({
      address: v08,
      abi: sponsorPaymasterAbi,
      functionName: "signer",
    });
    const nextKey = generatePrivateKey();
    const next = privateKeyToAccount(nextKey).address;
    const latest = Number((await chain.publicClient.getBlock()).timestamp);
    const run = await paymasterCli([
      "rotate-signer",
      next,
      "--previous-valid-for",
      "3900",
      "--entry-point",
      "v0.8",
      "--paymaster",
      v08,
    ]);
    assert.equal(run.status, 0, run.stderr);
    assert.equal(await read(v08, "signer"), next);
    assert.equal(await read(v08, "previousSigner"), before);
    const validUntil = await chain.publicClient.readContract({
      address: v08,
      abi: sponsorPaymasterAbi,
      functionName: "previousSignerValidUntil",
    });
    assert.equal(validUntil, latest + 3900);

    const stale = await paymasterCli(["check", "--entry-point", "v0.8", "--paymaster", v08]);
    assert.equal(stale.status, 1);
    assert.match(
      stale.stdout,
      /FAIL {2}SIGNER_PRIVATE_KEY is the previous signer .* restart the service with the key of/,
    );
    const restarted = await paymasterCli(["check", "--entry-point", "v0.8", "--paymaster", v08], {
      SIGNER_PRIVATE_KEY: nextKey,
    });
    assert.equal(restarted.last, "OK", restarted.stdout);
    assert.match(
      restarted.stdout,
      new RegExp(`INFO  previous signer ${before} accepted until block time ${latest + 3900}`),
    );

    const tooLong = await paymasterCli([
      "rotate-signer",
      randomAccount().address,
      "--previous-valid-for",
      "86401",
      "--paymaster",
      v08,
      "--entry-point",
      "v0.8",
    ]);
    assertOneLineError(tooLong, 2, /--previous-valid-for must be between 1 and 86400/);
  });

  test("a key that is not the owner's changes nothing, and says so in one line", async () => {
    const stranger = generatePrivateKey();
    await chain.testClient.setBalance({
      address: privateKeyToAccount(stranger).address,
      value: parseEther("1"),
    });
    const signerBefore = await read(v07, "signer");
    const run = await paymasterCli(["set-signer", randomAccount().address, "--paymaster", v07], {
      OPERATOR_PRIVATE_KEY: stranger,
    });
    assertOneLineError(
      run,
      1,
      /set-signer: the key in OPERATOR_PRIVATE_KEY \(0x[0-9a-fA-F]{40}\) is not the paymaster's owner/,
    );
    assert.equal(await read(v07, "signer"), signerBefore);
    assert.ok(!run.stderr.includes(stranger.slice(2)));
  });
});

describe("taking funds back", () => {
  test("withdraw --to --amount moves exactly that amount out of the deposit; more than the deposit is refused before sending", async () => {
    const to = randomAccount().address;
    const run = await paymasterCli(["withdraw", "--to", to, "--amount", "0.2ether", "--paymaster", v07]);
    assert.equal(run.status, 0, run.stderr);
    assert.equal(await chain.publicClient.getBalance({ address: to }), parseEther("0.2"));
    assert.equal((await depositInfo(stack.entryPoint, v07)).deposit, parseEther("0.3"));

    const tooMuch = await paymasterCli(["withdraw", "--to", to, "--amount", "1ether", "--paymaster", v07]);
    assertOneLineError(tooMuch, 1, /withdraw: the deposit holds only 0\.3 S/);
    assert.equal((await depositInfo(stack.entryPoint, v07)).deposit, parseEther("0.3"));
  });

  test("unlock-stake, then withdraw-stake is refused until the unstake delay has passed, then pays the stake to --to", async () => {
    const to = randomAccount().address;
    const unlock = await paymasterCli(["unlock-stake", "--paymaster", v07]);
    assert.equal(unlock.status, 0, unlock.stderr);
    const unlocking = await depositInfo(stack.entryPoint, v07);
    assert.ok(unlocking.withdrawTime > 0);
    const check = await paymasterCli(["check", "--paymaster", v07, "--signer", await read(v07, "signer")]);
    assert.match(check.stdout, /FAIL {2}stake is unlocking/);

    const early = await paymasterCli(["withdraw-stake", "--to", to, "--paymaster", v07]);
    assertOneLineError(early, 1, /withdraw-stake: refused by the contract: Stake withdrawal is not due/);
    assert.equal(await chain.publicClient.getBalance({ address: to }), 0n);

    await chain.testClient.increaseTime({ seconds: ONE_DAY_SEC + 1 });
    await chain.testClient.mine({ blocks: 1 });
    const run = await paymasterCli(["withdraw-stake", "--to", to, "--paymaster", v07]);
    assert.equal(run.status, 0, run.stderr);
    assert.equal(await chain.publicClient.getBalance({ address: to }), parseEther("1"));
    const info = await depositInfo(stack.entryPoint, v07);
    assert.deepEqual([info.stake, info.staked, info.deposit], [0n, false, parseEther("0.3")]);
  });
});

describe("refusals before anything is sent", () => {
  test("usage mistakes exit 2 with one line; a key as a flag is refused; bad amounts are never rounded", async () => {
    // As a child process once (the real entry point's exit status and stderr)...
    const keyFlag = await paymasterCli(["deposit", "--amount", "1", `--private-key=${operatorKey}`]);
    assertOneLineError(keyFlag, 2, /keys are never taken on the command line/);
    // ...and the rest in this process, through the same runCli the script calls.
    assertOneLineError(await inProcess(["deposit"]), 2, /deposit needs --amount/);
    assertOneLineError(await inProcess(["frobnicate"]), 2, /unknown command: got a 10-character value/);
    assertOneLineError(
      await inProcess(["deposit", "--amount", "1", "--to", zeroAddress]),
      2,
      /--to is not an option of deposit/,
    );
    assertOneLineError(
      await inProcess(["deposit", "--amount", "0.1wei"]),
      2,
      /more decimals than wei allows/,
    );
    assertOneLineError(await inProcess(["deposit", "--amount", "1e18"]), 2, /is not an amount/);
    assertOneLineError(
      await inProcess(["deploy", "--signer", serviceSigner]),
      2,
      /deploy needs --entry-point/,
    );
    assertOneLineError(
      await inProcess(["set-signer", "--paymaster", v07]),
      2,
      /usage: .*set-signer <address>/,
    );
  });

  test("without OPERATOR_PRIVATE_KEY, or with a malformed one, a write is refused without echoing it", async () => {
    const missing = await inProcess(["deposit", "--amount", "1", "--paymaster", v07], {
      OPERATOR_PRIVATE_KEY: undefined,
    });
    assertOneLineError(missing, 1, /set OPERATOR_PRIVATE_KEY/);
    const malformed = `${operatorKey.slice(0, 40)}zz`;
    const bad = await inProcess(["deposit", "--amount", "1", "--paymaster", v07], {
      OPERATOR_PRIVATE_KEY: malformed,
    });
    assertOneLineError(bad, 1, /OPERATOR_PRIVATE_KEY is not 32 bytes of hex/);
    assert.ok(!bad.stderr.includes(malformed.slice(2, 30)));
  });

  test("an RPC that serves another chain is refused before anything is read or sent", async () => {
    const other = await startChain({ chainId: 31337 });
    try {
      const run = await inProcess([
        "deposit",
        "--amount",
        "1",
        "--paymaster",
        v07,
        "--rpc-url",
        other.rpcUrl,
      ]);
      assertOneLineError(run, 1, /the RPC at 127\.0\.0\.1:\d+ serves chain 31337, not 14601/);
    } finally {
      await other.stop();
    }
  });

  test("--chain addresses another chain the service serves: its RPC, its EntryPoint, amounts in its currency", async () => {
    const other = await startChain({ chainId: 31337 });
    try {
      // The same deployer, the same nonces: the paymaster has the v0.7 stack's address there too.
      const otherStack = await deployStack(other, { signer: serviceSigner });
      const env = {
        CHAINS: "14601,31337",
        CHAIN_31337_NAME: "Local",
        CHAIN_31337_RPC_URL: other.rpcUrl,
        CHAIN_31337_CURRENCY_SYMBOL: "LOC",
      };
      const run = await inProcess(["check", "--chain", "31337", "--paymaster", otherStack.paymaster], env);
      assert.equal(run.status, 0, run.stderr);
      assert.match(
        run.stdout,
        new RegExp(`paymaster ${otherStack.paymaster} on chain 31337, EntryPoint v0\\.7`),
      );
      assert.match(run.stdout, /deposit [0-9.]+ LOC/);
      assert.doesNotMatch(run.stdout, / S\b/);
      // A chain the service does not serve is a command-line mistake, as with --chain-id.
      assertOneLineError(await inProcess(["check", "--chain", "146"], env), 2, /146/);
    } finally {
      await other.stop();
    }
  });

  test("no output of any run contained the operator's key or the service's signer key", () => {
    assert.ok(printed.length > 20);
    for (const secret of [operatorKey, serviceKey] as Hex[]) {
      for (const text of printed) assert.ok(!text.includes(secret.slice(2)), "a key was printed");
    }
  });
});
