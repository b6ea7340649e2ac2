/**
 * The paymaster's EntryPoint deposit against what the service promised (issue 10): readiness
 * (`chain:<id>:paymaster-deposit`), the chain parity report and the metrics say `low` before the
 * deposits run short of the tanks, and `short` — logged at error level — when a paymaster cannot
 * pay the reservations already signed for it. On anvil with the real EntryPoints; the deposits
 * are moved with the paymaster's own deposit() and withdrawTo().
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Address, formatEther, parseEther } from "viem";
import { type ChainWatchers, createChainWatchers } from "../../src/chains/watchers.ts";
import { loadConfig } from "../../src/config.ts";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { sponsorPaymasterAbi } from "../../src/paymaster/abi.ts";
import { seedProject } from "../support/app.ts";
import {
  allowlist,
  authorize,
  chainParity,
  MINT_SELECTOR,
  paymasterDeposit,
  type ServiceOnChain,
  sponsorUnknownAccounts,
  startServiceOnChain,
} from "../support/chain-service.ts";

const OPERATOR = "ops@example.com";
const CHECK = "chain:14601:paymaster-deposit";

let s: ServiceOnChain;
let watchers: ChainWatchers;
let p: Awaited<ReturnType<typeof seedProject>>;
let operatorToken: string;

before(async () => {
  s = await startServiceOnChain({ confirmations: 0, operator: OPERATOR });
  watchers = createChainWatchers(s.t.config, s.t.db, { metrics: s.t.services.metrics });
  s.t.services.readiness.push(...watchers.probes);
  // The watchers are ticked once (never started), so that their lag is known and the rest is ok.
  await watchers.chains[0]!.deposits.tick();
  for (const pair of watchers.chains[0]!.settlements) await pair.watcher.tick();
  p = await seedProject(s.t);
  // The tests authorize for an EOA (no account code): the project sponsors unknown senders on
  // caps alone, set before any authorization (the service caches a project's terms briefly).
  await sponsorUnknownAccounts(s.t, p);
  await allowlist(s.t, p, s.stack.gameItems, MINT_SELECTOR);
  operatorToken = await s.t.token(OPERATOR);
});

after(async () => {
  await s?.stop();
});

async function fund(amountWei: bigint, reference: string) {
  await creditDeposit(s.t.db, { projectId: p.projectId, reference, amountWei });
}

interface Seen {
  statusCode: number;
  overall: string;
  check: { status: string; detail: string };
  coverage: { status: string; warnBelow: string; warnPercent: number; detail: string };
  tanks: bigint;
  openReservations: bigint;
  depositsCover: boolean | null;
  metrics: string;
}

/** Readiness, chain parity and the metrics, read now. */
async function seen(): Promise<Seen> {
  const ready = await s.t.request({ method: "GET", url: "/health/ready" });
  const parity = (await chainParity(s.t, operatorToken)) as unknown as {
    depositCoverage: Seen["coverage"];
    tanks: string;
    openReservations: string;
    depositsCover: boolean | null;
  };
  const metrics = await s.t.request({ method: "GET", url: "/metrics" });
  assert.equal(metrics.statusCode, 200);
  return {
    statusCode: ready.statusCode,
    overall: ready.json().status,
    check: ready.json().checks[CHECK],
    coverage: parity.depositCoverage,
    tanks: BigInt(parity.tanks),
    openReservations: BigInt(parity.openReservations),
    depositsCover: parity.depositsCover,
    metrics: metrics.body,
  };
}

function gauge(text: string, series: string): number {
  const escaped = series.replace(/[{}"]/g, (c) => `\\${c}`);
  const match = new RegExp(`^${escaped} (\\S+)$`, "m").exec(text);
  assert.ok(match, `no sample ${series}`);
  return Number(match[1]);
}

/** The logged transitions of the deposit check: [level, from, to]. */
function transitions(): [number, string, string][] {
  return s.t.logs
    .map((line) => JSON.parse(line))
    .filter((l) => l.msg === "readiness changed" && l.check === CHECK)
    .map((l) => [l.level, l.from, l.to]);
}

async function paymasterCall(functionName: "deposit" | "withdrawTo", paymaster: Address, arg?: bigint) {
  const owner = s.chain.wallets[0]!;
  const hash =
    functionName === "deposit"
      ? await owner.writeContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName, value: arg })
      : await owner.writeContract({
          address: paymaster,
          abi: sponsorPaymasterAbi,
          functionName,
          args: [owner.account.address, arg!],
        });
  await s.chain.publicClient.waitForTransactionReceipt({ hash });
}

describe("the paymasters' EntryPoint deposits against the tanks and open reservations", () => {
  it("ok while the deposits cover the tanks: readiness, parity and the metrics agree", async () => {
    await fund(parseEther("5"), "fund:1");
    const now = await seen();
    assert.equal(now.statusCode, 200);
    assert.equal(now.overall, "ok");
    assert.equal(now.check.status, "ok");
    assert.match(
      now.check.detail,
      /^the paymasters' EntryPoint deposits \(20000000000000000000 wei\) cover open reservations 0 wei \+ 100% of the gas tanks' 5000000000000000000 wei/,
    );
    assert.equal(now.coverage.status, "ok");
    assert.equal(now.coverage.warnBelow, parseEther("5").toString());
    assert.equal(now.coverage.warnPercent, 100);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_coverage{chain_id="14601"}'), 0);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_ether{chain_id="14601",entry_point="0.7"}'), 10);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_ether{chain_id="14601",entry_point="0.8"}'), 10);
    assert.equal(gauge(now.metrics, 'gss_gas_tanks_ether{chain_id="14601"}'), 5);
    assert.equal(gauge(now.metrics, 'gss_open_reservations_ether{chain_id="14601"}'), 0);
    assert.deepEqual(transitions(), []);
  });

  it("low when the tanks outgrow the deposits: 200 degraded with the numbers, one warn line, metric 1", async () => {
    await fund(parseEther("20"), "fund:2");
    const now = await seen();
    assert.equal(now.statusCode, 200);
    assert.equal(now.overall, "degraded");
    assert.equal(now.check.status, "degraded");
    assert.match(
      now.check.detail,
      /^deposit low: the paymasters' EntryPoint deposits \(20000000000000000000 wei\) are below open reservations 0 wei \+ 100% of the gas tanks' 25000000000000000000 wei = 25000000000000000000 wei; top them up/,
    );
    assert.equal(now.coverage.status, "low");
    assert.equal(now.coverage.detail, now.check.detail);
    assert.equal(now.depositsCover, false);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_coverage{chain_id="14601"}'), 1);
    await seen();
    assert.deepEqual(transitions(), [[40, "ok", "degraded"]]);
  });

  it("short when the v0.7 paymaster cannot pay what it authorized: one error line, metric 2, parity says so", async () => {
    const user = s.chain.wallets[3]!.account.address;
    const auths = [];
    for (let i = 0; i < 2; i++)
      auths.push(await authorize(s.t, p, { user, target: s.stack.gameItems, selector: MINT_SELECTOR }));
    const reservedWei = auths.reduce((sum, a) => sum + BigInt(a.maxGasCost), 0n);
    // Leave the v0.7 paymaster half of what it owes.
    const deposit = await paymasterDeposit(s.chain, s.stack);
    await paymasterCall("withdrawTo", s.stack.paymaster, deposit - reservedWei / 2n);
    const left = await paymasterDeposit(s.chain, s.stack);
    assert.equal(left, reservedWei / 2n);

    const now = await seen();
    assert.equal(
      now.statusCode,
      200,
      "the service still serves authorize: a load balancer cannot fix a deposit",
    );
    assert.equal(now.check.status, "degraded");
    assert.equal(
      now.check.detail,
      `deposit short: the v0.7 paymaster's EntryPoint deposit (${left} wei) is below its open reservations (${reservedWei} wei): operations already authorized can fail on chain (AA31); deposit now`,
    );
    assert.equal(now.coverage.status, "short");
    assert.equal(now.openReservations, reservedWei);
    assert.equal(now.tanks, parseEther("25") - reservedWei);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_coverage{chain_id="14601"}'), 2);
    assert.equal(
      gauge(now.metrics, 'gss_paymaster_deposit_ether{chain_id="14601",entry_point="0.7"}'),
      Number(formatEther(left)),
    );
    assert.equal(
      gauge(now.metrics, 'gss_open_reservations_ether{chain_id="14601"}'),
      Number(formatEther(reservedWei)),
    );
    await seen();
    assert.deepEqual(transitions(), [
      [40, "ok", "degraded"],
      [50, "degraded", "degraded!"],
    ]);
  });

  it("topped up: ok again, one info line, metric 0", async () => {
    await paymasterCall("deposit", s.stack.paymaster, parseEther("30"));
    const now = await seen();
    assert.equal(now.check.status, "ok", now.check.detail);
    assert.equal(now.coverage.status, "ok");
    assert.equal(now.depositsCover, true);
    assert.equal(gauge(now.metrics, 'gss_paymaster_deposit_coverage{chain_id="14601"}'), 0);
    assert.deepEqual(transitions(), [
      [40, "ok", "degraded"],
      [50, "degraded", "degraded!"],
      [30, "degraded!", "ok"],
    ]);
  });

  it("the warn share is a setting: PAYMASTER_DEPOSIT_WARN_PERCENT", async () => {
    assert.equal(loadConfig({}).depositWarnPercent, 100);
    assert.equal(loadConfig({ PAYMASTER_DEPOSIT_WARN_PERCENT: "25" }).depositWarnPercent, 25);
    assert.throws(
      () => loadConfig({ PAYMASTER_DEPOSIT_WARN_PERCENT: "-1" }),
      /PAYMASTER_DEPOSIT_WARN_PERCENT/,
    );
  });
});
