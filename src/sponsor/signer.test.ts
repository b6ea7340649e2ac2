import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { secp256k1 } from "@noble/curves/secp256k1";
import { hexToBytes, keccak256, recoverAddress, toHex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { type Backend, createSigner, javascript, SAMPLE_EVERY } from "./signer.ts";

const KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

describe("signer", () => {
  it("uses the native libsecp256k1 binding when it loads, and pure JavaScript otherwise", () => {
    assert.equal(createSigner(KEY).backend, "native");
    assert.equal(createSigner(KEY, { preferNative: false }).backend, "javascript");
  });

  it("both backends give the same RFC 6979 signature, recovering to the signer", async () => {
    const native = createSigner(KEY);
    const js = createSigner(KEY, { preferNative: false });
    for (let i = 0; i < 20; i++) {
      const digest = keccak256(toHex(`message ${i}`));
      const a = native.signDigest(digest);
      assert.equal(a, js.signDigest(digest));
      assert.equal(await recoverAddress({ hash: digest, signature: a }), privateKeyToAddress(KEY));
      assert.equal(a.length, 2 + 65 * 2);
    }
  });

  it("a backend that signs wrongly from the start is refused when the signer is made", () => {
    const other = hexToBytes("0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba");
    const wrongKey: Backend = { ...javascript, sign: (digest) => javascript.sign(digest, other) };
    assert.throws(() => createSigner(KEY, { backend: wrongKey }), /disagrees/);
  });

  it("a high-s or malformed signature never leaves, whatever the sample", () => {
    let on = false;
    const highS: Backend = {
      ...javascript,
      sign(digest, priv) {
        const good = javascript.sign(digest, priv);
        if (!on) return good;
        // The other valid signature of the same digest: s' = n - s (rejected as malleable).
        const s = BigInt(toHex(good.rs.subarray(32)));
        const flipped = hexToBytes(toHex(secp256k1.CURVE.n - s, { size: 32 }));
        const rs = new Uint8Array(64);
        rs.set(good.rs.subarray(0, 32), 0);
        rs.set(flipped, 32);
        return { rs, recovery: 1 - good.recovery };
      },
    };
    const signer = createSigner(KEY, { backend: highS });
    signer.signDigest(keccak256(toHex("first")));
    on = true;
    assert.throws(() => signer.signDigest(keccak256(toHex("second"))), /malformed/);
  });

  it("the shape check's bounds are exact: 0 < r < n and 0 < s <= n/2, compared as 32-byte words", () => {
    const n = secp256k1.CURVE.n;
    let next: { r: bigint; s: bigint } | null = null;
    const crafted: Backend = {
      ...javascript,
      sign(digest, priv) {
        if (!next) return javascript.sign(digest, priv);
        const rs = new Uint8Array(64);
        rs.set(hexToBytes(toHex(next.r, { size: 32 })), 0);
        rs.set(hexToBytes(toHex(next.s, { size: 32 })), 32);
        return { rs, recovery: 0 };
      },
    };
    const signer = createSigner(KEY, { backend: crafted });
    // The first signature is recovered (the sample); the crafted ones after it are only shaped.
    signer.signDigest(keccak256(toHex("first")));
    const outcome = (r: bigint, s: bigint, i: number) => {
      next = { r, s };
      try {
        signer.signDigest(keccak256(toHex(`crafted ${i}`)));
        return "left";
      } catch (err) {
        assert.match((err as Error).message, /malformed/);
        return "refused";
      }
    };
    const cases: [bigint, bigint, string][] = [
      [1n, 1n, "left"],
      [n - 1n, n >> 1n, "left"],
      [0n, 1n, "refused"],
      [n, 1n, "refused"],
      [2n ** 256n - 1n, 1n, "refused"],
      [1n, 0n, "refused"],
      [1n, (n >> 1n) + 1n, "refused"],
      [1n, n - 1n, "refused"],
    ];
    cases.forEach(([r, s, expected], i) => {
      assert.equal(outcome(r, s, i), expected, `r = ${r}, s = ${s}`);
    });
  });

  it("a backend that starts signing with another key is caught within SAMPLE_EVERY signatures", () => {
    const other = hexToBytes("0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba");
    let broken = false;
    const drifting: Backend = {
      ...javascript,
      sign: (digest, priv) => javascript.sign(digest, broken ? other : priv),
    };
    const signer = createSigner(KEY, { backend: drifting });
    signer.signDigest(keccak256(toHex("before")));
    broken = true;
    let caughtAfter = -1;
    for (let i = 0; i < SAMPLE_EVERY; i++) {
      try {
        signer.signDigest(keccak256(toHex(`after ${i}`)));
      } catch (err) {
        assert.match((err as Error).message, /does not recover/);
        caughtAfter = i;
        break;
      }
    }
    assert.ok(caughtAfter >= 0 && caughtAfter < SAMPLE_EVERY, `caught after ${caughtAfter}`);
  });

  it("refuses a digest that is not 32 bytes", () => {
    assert.throws(() => createSigner(KEY).signDigest("0x1234"));
  });
});
