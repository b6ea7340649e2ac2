/**
 * Readiness and the metrics see the paymasters' stakes (issue 20): after `unlock-stake` public
 * bundlers refuse every operation the service signs, and until then nothing said so. On anvil with
 * the real EntryPoints v0.7 and v0.8; the stakes are moved only with the operator CLI's own
 * commands, run as child processes (dist/operator/main.js) with the owner's key. The service
 * requires 1 S of stake and a day's unstake delay (CHAIN_14601_PAYMASTER_MIN_*), which the
 * devnet's paymasters start with.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseEther } from "viem";
import { createChainWatchers } from "../../src/chains/watchers.ts";
import { TEST_SIGNER_KEY } from "../support/app.ts";
import { devWalletKey } from "../support/chain/anvil.ts";
import { eventually, type ServiceOnChain, startServiceOnChain } from "../support/chain-service.ts";
import { runPaymasterCli } from "../support/operator-cli.ts";
import { randomAccount } from "../support/userop.ts";

const ONE_DAY_SEC = 86_400;
const CHECK_V07 = "chain:14601:paymaster-stake";
const CHECK_V08 = "chain:14601:paymaster-stake:0.8";
const MINIMUMS = {
  CHAIN_14601_PAYMASTER_MIN_STAKE_WEI: parseEther("1").toString(),
  CHAIN_14601_PAYMASTER_MIN_UNSTAKE_DELAY_SEC: String(ONE_DAY_SEC),
};
const ERROR = 50;
const WARN = 40;
const INFO = 30;

let s: ServiceOnChain;
let dataDir: string;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "paymaster-stake-"));
  s = await startServiceOnChain({ confirmations: 0, env: MINIMUMS });
  // The chain's probes as server.ts wires them, reading the stake at every evaluation.
  const watchers = createChainWatchers(s.t.config, s.t.db, {
    metrics: s.t.services.metrics,
    stakeRefreshMs: 0,
  });
  s.t.services.readiness.push(...watchers.probes);
  // Ticked once (never started), so that their lag is known and every other check is ok.
  await watchers.chains[0]!.deposits.tick();
  for (const pair of watchers.chains[0]!.settlements) await pair.watcher.tick();
});

after(async () => {
  await s?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** The operator CLI against the service's chain and paymasters, as their owner (anvil wallet 0). */
async function paymaster(...args: string[]): Promise<string> {
  const run = await runPaymasterCli(args, {
    DATA_DIR: dataDir,
    CHAIN_14601_RPC_URL: s.chain.rpcUrl,
    CHAIN_14601_PAYMASTER_ADDRESS: s.stack.paymaster,
    CHAIN_14601_PAYMASTER_V08_ADDRESS: s.stack.v08.paymaster,
    OPERATOR_PRIVATE_KEY: devWalletKey(0),
    ...MINIMUMS,
  });
  assert.equal(run.status, 0, `${args.join(" ")}: ${run.stderr}`);
  return run.stdout;
}

interface Seen {
  overall: string;
  checks: Record<string, { status: string; detail: string }>;
  metrics: string;
}

/**
 * Readiness and the metrics once `check` has a detail matching `detail` (and each check of `also`
 * its own): a background evaluation may have begun its read just before the last transaction, so
 * the next one may still show it, and the two paymasters' checks answer each in its own time.
 */
async function seenWhen(check: string, detail: RegExp, also: Record<string, RegExp> = {}): Promise<Seen> {
  const wanted: [string, RegExp][] = [[check, detail], ...Object.entries(also)];
  const checks = await eventually(
    async () => {
      const ready = await s.t.request({ method: "GET", url: "/health/ready" });
      assert.equal(ready.statusCode, 200);
      const body = ready.json();
      return wanted.every(([name, re]) => re.test(body.checks[name]?.detail ?? "")) ? body : undefined;
    },
    wanted.map(([name, re]) => `${name} to match ${re}`).join(" and "),
  );
  const metrics = await s.t.request({ method: "GET", url: "/metrics" });
  assert.equal(metrics.statusCode, 200);
  return { overall: checks.status, checks: checks.checks, metrics: metrics.body };
}

function gauge(text: string, name: string, entryPoint: "0.7" | "0.8"): number {
  const match = new RegExp(`^${name}\\{chain_id="14601",entry_point="${entryPoint}"\\} (\\S+)$`, "m").exec(
    text,
  );
  assert.ok(match, `no sample of ${name} for ${entryPoint}`);
  return Number(match[1]);
}

const stakeOf = (seen: Seen, entryPoint: "0.7" | "0.8") => ({
  ok: gauge(seen.metrics, "gss_paymaster_stake_ok", entryPoint),
  ether: gauge(seen.metrics, "gss_paymaster_stake_ether", entryPoint),
  delaySec: gauge(seen.metrics, "gss_paymaster_unstake_delay_seconds", entryPoint),
});

/** The logged transitions of a check: [level, from, to]. */
function transitions(check: string): [number, string, string][] {
  return s.t.logs
    .map((line) => JSON.parse(line))
    .filter((l) => l.msg === "readiness changed" && l.check === check)
    .map((l) => [l.level, l.from, l.to]);
}

async function afterTheUnstakeDelay() {
  await s.chain.testClient.increaseTime({ seconds: ONE_DAY_SEC + 1 });
  await s.chain.testClient.mine({ blocks: 1 });
}

describe("readiness and the metrics follow the paymasters' stakes through the operator CLI", () => {
  it("staked at the minimums (1 S, a day): ready ok, both paymasters' stake checks ok, stake_ok 1", async () => {
    // The v0.8 paymaster's check answers in its own time: on a loaded machine it had not yet when
    // the v0.7 one had (2026-11-30, CI's embedded pass), and readiness was degraded for it.
    const seen = await seenWhen(CHECK_V07, /is staked/, { [CHECK_V08]: /is staked/ });
    assert.equal(seen.overall, "ok", JSON.stringify(seen.checks));
    assert.match(
      seen.checks[CHECK_V07]!.detail,
      new RegExp(
        `^the v0\\.7 paymaster ${s.stack.paymaster} is staked: 1000000000000000000 wei with an unstake delay of 86400 s, locked`,
      ),
    );
    assert.equal(seen.checks[CHECK_V08]!.status, "ok");
    assert.deepEqual(stakeOf(seen, "0.7"), { ok: 1, ether: 1, delaySec: ONE_DAY_SEC });
    assert.deepEqual(stakeOf(seen, "0.8"), { ok: 1, ether: 1, delaySec: ONE_DAY_SEC });
    assert.deepEqual(transitions(CHECK_V07), []);
  });

  it("unlock-stake: degraded naming the paymaster and 'unlocking', logged at error level; stake_ok 0", async () => {
    await paymaster("unlock-stake");
    const seen = await seenWhen(CHECK_V07, /unlocking/);
    assert.equal(seen.overall, "degraded");
    assert.equal(seen.checks[CHECK_V07]!.status, "degraded");
    assert.match(
      seen.checks[CHECK_V07]!.detail,
      new RegExp(
        `^the v0\\.7 paymaster ${s.stack.paymaster} is unlocking its stake \\(withdrawable at block time \\d+\\): bundlers treat it as unstaked`,
      ),
    );
    assert.equal(seen.checks[CHECK_V08]!.status, "ok");
    // Still 1 S in the EntryPoint, but no bundler counts it.
    assert.deepEqual(stakeOf(seen, "0.7"), { ok: 0, ether: 1, delaySec: ONE_DAY_SEC });
    assert.equal(stakeOf(seen, "0.8").ok, 1);
    assert.deepEqual(transitions(CHECK_V07), [[ERROR, "ok", "degraded!"]]);
  });

  it("withdraw-stake once the delay has passed: not staked, stake 0", async () => {
    await afterTheUnstakeDelay();
    await paymaster("withdraw-stake", "--to", randomAccount().address);
    const seen = await seenWhen(CHECK_V07, /is not staked/);
    assert.equal(seen.overall, "degraded");
    assert.deepEqual(stakeOf(seen, "0.7"), { ok: 0, ether: 0, delaySec: 0 });
    // Still critical: no new transition is logged.
    assert.deepEqual(transitions(CHECK_V07), [[ERROR, "ok", "degraded!"]]);
  });

  it("stake of 0.5 S, below the configured 1 S: degraded 'below the minimum' (a warning); stake_ok 0", async () => {
    await paymaster("stake", "--amount", "0.5ether", "--unstake-delay", String(ONE_DAY_SEC));
    const seen = await seenWhen(CHECK_V07, /below the minimum/);
    assert.equal(seen.overall, "degraded");
    assert.match(
      seen.checks[CHECK_V07]!.detail,
      /is staked below the minimum: 500000000000000000 wei with an unstake delay of 86400 s, below the minimum 1000000000000000000 wei and 86400 s/,
    );
    assert.deepEqual(stakeOf(seen, "0.7"), { ok: 0, ether: 0.5, delaySec: ONE_DAY_SEC });
    assert.deepEqual(transitions(CHECK_V07), [
      [ERROR, "ok", "degraded!"],
      [WARN, "degraded!", "degraded"],
    ]);
  });

  it("topped up to 1 S with another stake: ok again, logged at info; stake_ok 1", async () => {
    await paymaster("stake", "--amount", "0.5ether", "--unstake-delay", String(ONE_DAY_SEC));
    const seen = await seenWhen(CHECK_V07, /is staked:/);
    assert.equal(seen.overall, "ok", JSON.stringify(seen.checks));
    assert.deepEqual(stakeOf(seen, "0.7"), { ok: 1, ether: 1, delaySec: ONE_DAY_SEC });
    assert.deepEqual(transitions(CHECK_V07).at(-1), [INFO, "degraded", "ok"]);
  });

  it("v0.8: unlocking, then restaked for an hour (below the day required): degraded each time; stake_ok 0", async () => {
    await paymaster("unlock-stake", "--entry-point", "v0.8");
    const unlocking = await seenWhen(CHECK_V08, /unlocking/);
    assert.match(
      unlocking.checks[CHECK_V08]!.detail,
      new RegExp(`^the v0\\.8 paymaster ${s.stack.v08.paymaster} is unlocking its stake`),
    );
    assert.equal(unlocking.checks[CHECK_V07]!.status, "ok");
    assert.equal(stakeOf(unlocking, "0.8").ok, 0);

    await afterTheUnstakeDelay();
    await paymaster("withdraw-stake", "--to", randomAccount().address, "--entry-point", "v0.8");
    await paymaster("stake", "--amount", "1ether", "--unstake-delay", "3600", "--entry-point", "v0.8");
    const short = await seenWhen(CHECK_V08, /below the minimum/);
    assert.equal(short.overall, "degraded");
    assert.match(
      short.checks[CHECK_V08]!.detail,
      /1000000000000000000 wei with an unstake delay of 3600 s, below/,
    );
    assert.deepEqual(stakeOf(short, "0.8"), { ok: 0, ether: 1, delaySec: 3600 });
  });

  it("the CLI's check holds the paymaster to the same minimums as readiness", async () => {
    const run = await runPaymasterCli(["check", "--entry-point", "v0.8"], {
      SIGNER_PRIVATE_KEY: TEST_SIGNER_KEY,
      DATA_DIR: dataDir,
      CHAIN_14601_RPC_URL: s.chain.rpcUrl,
      CHAIN_14601_PAYMASTER_V08_ADDRESS: s.stack.v08.paymaster,
      ...MINIMUMS,
    });
    assert.equal(run.status, 1, run.stdout + run.stderr);
    assert.match(
      run.stdout,
      /FAIL {2}stake 1 S with an unstake delay of 3600 s is below the minimum \(1 S, 86400 s\)/,
    );
  });
});
