import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { keccak256, recoverAddress, toHex } from "viem";
import { privateKeyToAddress } from "viem/accounts";
import { createSigner } from "./signer.ts";

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

  it("refuses a digest that is not 32 bytes", () => {
    assert.throws(() => createSigner(KEY).signDigest("0x1234"));
  });
});
