import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Address } from "viem";
import { type Expectations, judge, type PaymasterState } from "./check.ts";

const PAYMASTER: Address = "0x00000000000000000000000000000000000000aa";
const ENTRY_POINT: Address = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
const SIGNER: Address = "0x00000000000000000000000000000000000000b1";
const OTHER: Address = "0x00000000000000000000000000000000000000c2";
const NOW = 1_800_000_000;

const healthy: PaymasterState = {
  paymaster: PAYMASTER,
  hasCode: true,
  entryPoint: ENTRY_POINT,
  signer: SIGNER,
  owner: OTHER,
  pendingOwner: null,
  previous: { signer: "0x0000000000000000000000000000000000000000", validUntilSec: 0 },
  deposit: {
    depositWei: 10n ** 18n,
    staked: true,
    stakeWei: 10n ** 18n,
    unstakeDelaySec: 86_400,
    withdrawTimeSec: 0,
  },
  latestTimestampSec: NOW,
};
const expect: Expectations = {
  decimals: 18,
  entryPoint: ENTRY_POINT,
  version: "0.7",
  signer: SIGNER,
  signerSource: "SIGNER_PRIVATE_KEY",
  minDepositWei: 1n,
  minStakeWei: 1n,
  minUnstakeDelaySec: 86_400,
  currency: "S",
};
const failures = (s: Partial<PaymasterState>, x: Partial<Expectations> = {}) =>
  judge({ ...healthy, ...s }, { ...expect, ...x })
    .filter((f) => f.level === "fail")
    .map((f) => f.text);

describe("judge", () => {
  it("finds nothing wrong with a funded, staked paymaster on the configured EntryPoint and signer", () => {
    assert.deepEqual(failures({}), []);
    // The address's letter case does not matter.
    assert.deepEqual(failures({}, { signer: SIGNER.toUpperCase().replace("0X", "0x") as Address }), []);
  });

  it("names each problem on its own line", () => {
    assert.deepEqual(failures({ hasCode: false }), [`no contract at ${PAYMASTER}`]);
    assert.match(failures({ entryPoint: null })[0]!, /not a SponsorPaymaster/);
    assert.match(
      failures({ entryPoint: OTHER })[0]!,
      /entryPoint\(\) is 0x0+c2, but the configured EntryPoint v0.7/,
    );
    assert.match(failures({ signer: OTHER })[0]!, /signer\(\) is 0x0+c2, but SIGNER_PRIVATE_KEY is 0x0+b1/);
    const d = healthy.deposit!;
    assert.match(
      failures({ deposit: { ...d, depositWei: 0n } })[0]!,
      /deposit 0 S is below 0.000000000000000001 S/,
    );
    assert.match(failures({ deposit: { ...d, staked: false, stakeWei: 0n } })[0]!, /not staked/);
    assert.match(
      failures({ deposit: { ...d, staked: false, withdrawTimeSec: NOW + 5 } })[0]!,
      /stake is unlocking/,
    );
    assert.match(failures({ deposit: { ...d, unstakeDelaySec: 3600 } })[0]!, /below the minimum/);
    assert.match(failures({}, { minStakeWei: 2n * 10n ** 18n })[0]!, /below the minimum \(2 S, 86400 s\)/);
    assert.match(failures({ deposit: null })[0]!, /no EntryPoint answers/);
    assert.equal(failures({ signer: OTHER, deposit: { ...d, depositWei: 0n, staked: false } }).length, 3);
  });

  it("during a rotation: a service still on the previous key fails (it has until the deadline), the new key passes", () => {
    const rotating = { signer: OTHER, previous: { signer: SIGNER, validUntilSec: NOW + 600 } };
    assert.match(
      failures(rotating)[0]!,
      /SIGNER_PRIVATE_KEY is the previous signer .* \(600 s\): restart the service/,
    );
    assert.deepEqual(failures(rotating, { signer: OTHER }), []);
    const notes = judge({ ...healthy, ...rotating }, { ...expect, signer: OTHER }).filter(
      (f) => f.level === "info",
    );
    assert.ok(notes.some((n) => /previous signer 0x0+b1 accepted until block time 1800000600/.test(n.text)));
    // Once the deadline has passed the previous key is just another wrong key.
    assert.match(failures({ ...rotating, latestTimestampSec: NOW + 601 })[0]!, /signer\(\) is 0x0+c2, but/);
  });
});
