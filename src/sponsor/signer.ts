import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { secp256k1 as nobleSecp } from "@noble/curves/secp256k1";
import { type Address, bytesToHex, type Hex, hexToBytes } from "viem";
import { privateKeyToAddress } from "viem/accounts";

/**
 * The paymaster signer. Signing sits on the authorize hot path, so it uses libsecp256k1 through
 * the `secp256k1` native binding (about ten times cheaper than pure JavaScript) and falls back to
 * @noble/curves where the binding cannot load. Every signature is recovered and compared with the
 * signer's own public key before it leaves: a faulty backend fails loudly, never silently.
 */
export interface Signer {
  readonly address: Address;
  readonly backend: "native" | "javascript";
  /** 65-byte r‖s‖v signature (v = 27 or 28) of a 32-byte digest. */
  signDigest(digest: Hex): Hex;
}

interface Backend {
  name: "native" | "javascript";
  publicKey(priv: Uint8Array): Uint8Array;
  sign(digest: Uint8Array, priv: Uint8Array): { rs: Uint8Array; recovery: number };
  recover(digest: Uint8Array, rs: Uint8Array, recovery: number): Uint8Array;
}

const javascript: Backend = {
  name: "javascript",
  publicKey: (priv) => nobleSecp.getPublicKey(priv, false),
  sign(digest, priv) {
    const sig = nobleSecp.sign(digest, priv, { lowS: true });
    return { rs: sig.toCompactRawBytes(), recovery: sig.recovery };
  },
  recover: (digest, rs, recovery) =>
    nobleSecp.Signature.fromCompact(rs).addRecoveryBit(recovery).recoverPublicKey(digest).toRawBytes(false),
};

function loadNative(): Backend | null {
  try {
    const native = createRequire(import.meta.url)("secp256k1/bindings") as typeof import("secp256k1");
    return {
      name: "native",
      publicKey: (priv) => native.publicKeyCreate(priv, false),
      sign(digest, priv) {
        const { signature, recid } = native.ecdsaSign(digest, priv);
        return { rs: signature, recovery: recid };
      },
      recover: (digest, rs, recovery) => native.ecdsaRecover(rs, recovery, digest, false),
    };
  } catch {
    return null;
  }
}

export function createSigner(privateKey: Hex, options: { preferNative?: boolean } = {}): Signer {
  const backend = (options.preferNative ?? true) ? (loadNative() ?? javascript) : javascript;
  const priv = hexToBytes(privateKey);
  const publicKey = backend.publicKey(priv);
  const address = privateKeyToAddress(privateKey);
  return {
    address,
    backend: backend.name,
    signDigest(digest) {
      const digestBytes = hexToBytes(digest);
      assert.equal(digestBytes.length, 32, "digest must be 32 bytes");
      const { rs, recovery } = backend.sign(digestBytes, priv);
      const recovered = backend.recover(digestBytes, rs, recovery);
      assert.ok(
        Buffer.from(recovered).equals(Buffer.from(publicKey)),
        "signature does not recover to the signer",
      );
      const out = new Uint8Array(65);
      out.set(rs, 0);
      out[64] = 27 + recovery;
      return bytesToHex(out);
    },
  };
}
