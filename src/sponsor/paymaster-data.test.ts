import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type Address, bytesToHex, type Hex, hashTypedData } from "viem";
import { type Sponsorship, sponsorshipDigest, sponsorshipTypedData } from "./paymaster-data.ts";

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => bytesToHex(b));

describe("sponsorshipDigest", () => {
  it("equals viem's generic hashTypedData for any input (the hand-written encoding is exact)", () => {
    fc.assert(
      fc.property(
        bytes(20),
        bytes(20),
        bytes(4),
        fc.bigInt(0n, 2n ** 128n - 1n),
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.integer({ min: 0, max: 2 ** 47 }),
        bytes(32),
        fc.integer({ min: 1, max: 2 ** 31 }),
        bytes(20),
        (
          sender,
          target,
          selector,
          maxGasCostWei,
          validUntilSec,
          validAfterSec,
          authId,
          chainId,
          paymaster,
        ) => {
          const s: Sponsorship = {
            sender: sender as Address,
            target: target as Address,
            selector: selector as Hex,
            maxGasCostWei,
            validUntilSec,
            validAfterSec,
            authId: authId as Hex,
          };
          const domain = { chainId, paymaster: paymaster as Address };
          assert.equal(sponsorshipDigest(domain, s), hashTypedData(sponsorshipTypedData(domain, s)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
