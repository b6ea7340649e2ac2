import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { LiveEntryPoint } from "../config.ts";
import { stakeState } from "../paymaster/stake.ts";
import { paymasterStakeProbe } from "./paymaster-stake.ts";

const PAIR: LiveEntryPoint = {
  version: "0.8",
  entryPoint: "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108",
  paymaster: "0x00000000000000000000000000000000000000aa",
};
const MIN = { minStakeWei: 10n ** 18n, minUnstakeDelaySec: 86_400 };
const LOCKED = { staked: true, stake: 10n ** 18n, unstakeDelaySec: 86_400, withdrawTime: 0 };

type Answer = typeof LOCKED | Error | "slow";

/** A client whose getDepositInfo gives the next answer of `answers` (the last one repeats). */
function fakeClient(answers: Answer[]) {
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    readContract: (async () => {
      const answer = answers[Math.min(calls++, answers.length - 1)]!;
      // Slow rather than never: a pending promise alone would not keep the test's event loop alive.
      if (answer === "slow") return new Promise((resolve) => setTimeout(() => resolve(LOCKED), 400));
      if (answer instanceof Error) throw answer;
      return { deposit: 0n, ...answer };
    }) as never,
  };
}

describe("stakeState", () => {
  const state = (over: Partial<Parameters<typeof stakeState>[0]>) =>
    stakeState(
      { staked: true, stakeWei: 10n ** 18n, unstakeDelaySec: 86_400, withdrawTimeSec: 0, ...over },
      MIN,
    );
  it("is staked at both minimums, below_minimum under either, unlocking once a withdraw time is set, else unstaked", () => {
    assert.equal(state({}), "staked");
    assert.equal(state({ stakeWei: 10n ** 18n - 1n }), "below_minimum");
    assert.equal(state({ unstakeDelaySec: 86_399 }), "below_minimum");
    assert.equal(state({ staked: false, withdrawTimeSec: 1_800_000_000 }), "unlocking");
    assert.equal(state({ staked: false, stakeWei: 0n, unstakeDelaySec: 0 }), "unstaked");
  });
});

describe("paymasterStakeProbe", () => {
  it("names the check per EntryPoint and is ok for a locked stake at the minimums", async () => {
    const probe = paymasterStakeProbe({
      chainId: 14601,
      pair: PAIR,
      client: fakeClient([LOCKED]),
      minimums: MIN,
    });
    assert.equal(probe.name, "chain:14601:paymaster-stake:0.8");
    const r = await probe.check();
    assert.equal(r.status, "ok", r.detail);
    assert.match(r.detail!, /the v0\.8 paymaster 0x0+aa is staked/);
  });

  it("reads the chain at most once per refresh interval", async () => {
    let t = 0;
    const client = fakeClient([LOCKED]);
    const probe = paymasterStakeProbe({
      chainId: 1,
      pair: PAIR,
      client,
      minimums: MIN,
      now: () => t,
      refreshMs: 1000,
    });
    await probe.check();
    t = 999;
    await probe.check();
    assert.equal(client.calls, 1);
    t = 1000;
    await probe.check();
    assert.equal(client.calls, 2);
  });

  it("unlocking and unstaked are degraded and critical; below a minimum is degraded", async () => {
    const unlocking = { ...LOCKED, staked: false, withdrawTime: 1_800_086_400 };
    const cases: [Answer, RegExp, boolean][] = [
      [unlocking, /is unlocking its stake \(withdrawable at block time 1800086400\)/, true],
      [{ ...LOCKED, staked: false, stake: 0n, unstakeDelaySec: 0 }, /is not staked/, true],
      [{ ...LOCKED, stake: 10n ** 17n }, /is staked below the minimum: 100000000000000000 wei/, false],
    ];
    for (const [answer, detail, critical] of cases) {
      const probe = paymasterStakeProbe({
        chainId: 1,
        pair: PAIR,
        client: fakeClient([answer]),
        minimums: MIN,
      });
      const r = await probe.check();
      assert.equal(r.status, "degraded");
      assert.match(r.detail!, detail);
      assert.equal(r.critical === true, critical);
    }
  });

  it("with the RPC down it keeps the last reading and says it is stale; never read is degraded (unknown)", async () => {
    let t = 0;
    const unlocking = { ...LOCKED, staked: false, withdrawTime: 5 };
    const probe = paymasterStakeProbe({
      chainId: 1,
      pair: PAIR,
      client: fakeClient([unlocking, new Error("fetch failed\nat somewhere")]),
      minimums: MIN,
      now: () => t,
      refreshMs: 1000,
    });
    assert.equal((await probe.check()).status, "degraded");
    t = 61_000;
    const stale = await probe.check();
    assert.equal(stale.status, "degraded");
    assert.equal(stale.critical, true);
    assert.match(
      stale.detail!,
      /is unlocking its stake .* \(stale: read 61 s ago; the RPC does not answer now\)$/,
    );

    const never = paymasterStakeProbe({
      chainId: 1,
      pair: PAIR,
      client: fakeClient([new Error("fetch failed")]),
      minimums: MIN,
    });
    const unknown = await never.check();
    assert.equal(unknown.status, "degraded");
    assert.match(unknown.detail!, /stake unknown, getDepositInfo has not answered \(fetch failed\)/);
  });

  it("never waits for a read longer than waitMs: a slow RPC answers from the last reading", async () => {
    let t = 0;
    const probe = paymasterStakeProbe({
      chainId: 1,
      pair: PAIR,
      client: fakeClient([LOCKED, "slow"]),
      minimums: MIN,
      now: () => t,
      refreshMs: 1000,
      waitMs: 20,
    });
    await probe.check();
    t = 5000;
    const started = performance.now();
    const r = await probe.check();
    assert.ok(performance.now() - started < 300);
    assert.equal(r.status, "ok");
  });
});
