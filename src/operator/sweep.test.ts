import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import type { Address } from "viem";
import { depositCallData, sweepTransaction } from "./sweep.ts";

const ENTRY_POINT: Address = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
const PAYMASTER: Address = "0x00000000000000000000000000000000000000aa";
const FROM: Address = "0x00000000000000000000000000000000000000b1";

describe("sweepTransaction", () => {
  it("moves balance − gas × maxFeePerGas, so the address can pay for its own transfer whatever it costs", () => {
    fc.assert(
      fc.property(
        fc.bigInt(0n, 10n ** 24n),
        fc.bigInt(21_000n, 200_000n),
        fc.bigInt(1n, 10n ** 12n),
        (balanceWei, gas, maxFee) => {
          const tx = sweepTransaction({
            chainId: 14601,
            index: 3,
            from: FROM,
            balanceWei,
            nonce: 7,
            entryPoint: ENTRY_POINT,
            paymaster: PAYMASTER,
            gas,
            fees: { maxFeePerGasWei: maxFee, maxPriorityFeePerGasWei: 1n },
          });
          if (balanceWei <= gas * maxFee) return assert.equal(tx, null);
          assert.ok(tx);
          assert.equal(BigInt(tx.value) + gas * maxFee, balanceWei);
          assert.ok(BigInt(tx.value) > 0n);
          assert.deepEqual(
            [tx.from, tx.to, tx.data, tx.nonce, tx.gas, tx.path],
            [FROM, ENTRY_POINT, depositCallData(PAYMASTER), 7, gas.toString(), "m/44'/60'/0'/0/3"],
          );
        },
      ),
    );
  });
});
