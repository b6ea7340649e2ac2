import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { secp256k1 as nobleSecp } from "@noble/curves/secp256k1";
import { type Address, bytesToHex, type Hex, hexToBytes } from "viem";
import { privateKeyToAddress } from "viem/accounts";

/**
 * The paymaster signer. Signing sits on the authorize hot path, so it uses libsecp256k1 through
 * the `secp256k1` native binding (about ten times cheaper than pure JavaScript) and falls back to
 * @noble/curves where the binding cannot load.
 *
 * A faulty backend must fail loudly, never silently. Recovering every signature to compare it
 * with the signer's key cost as much CPU as signing itself (6.7% of the service's CPU under the
 * bench), so the check is now in three parts that keep that guarantee for a backend that is
 * wrong, while a backend that goes wrong only now and then is caught within SAMPLE_EVERY
 * signatures (each of which the paymaster would refuse on chain, AA34: no money moves):
 * - at creation, a known answer: both libraries sign the same digests deterministically
 *   (RFC 6979), so the backend's signatures must equal @noble/curves' byte for byte, and recover;
 * - every signature: r and s in range, s in the lower half (what the EntryPoint's ECDSA accepts)
 *   and a recovery id of 0 or 1 — the shape of a signature, at the cost of a few comparisons;
 * - one signature in SAMPLE_EVERY (and the first): recovered and compared with the key.
 */
export interface Signer {
  readonly address: Address;
  readonly backend: "native" | "javascript";
  /** 65-byte r‖s‖v signature (v = 27 or 28) of a 32-byte digest. */
  signDigest(digest: Hex): Hex;
}

/** What a signing library must do; exported so that tests can hand in a faulty one. */
export interface Backend {
  name: "native" | "javascript";
  publicKey(priv: Uint8Array): Uint8Array;
  sign(digest: Uint8Array, priv: Uint8Array): { rs: Uint8Array; recovery: number };
  recover(digest: Uint8Array, rs: Uint8Array, recovery: number): Uint8Array;
}

export const javascript: Backend = {
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

/** One signature in this many is recovered and compared with the signer's key. */
export const SAMPLE_EVERY = 64;

/** 32-byte big-endian words, compared as bytes: a BigInt per half cost 1 % of the service's CPU. */
const word = (n: bigint) => hexToBytes(`0x${n.toString(16).padStart(64, "0")}`);
const ZERO = word(0n);
const N = word(nobleSecp.CURVE.n);
const HALF_N = word(nobleSecp.CURVE.n >> 1n);

/** Whether r‖s is a canonical signature: 0 < r < n and 0 < s ≤ n/2. */
function wellFormed(rs: Uint8Array, recovery: number): boolean {
  if (rs.length !== 64 || (recovery !== 0 && recovery !== 1)) return false;
  const r = rs.subarray(0, 32);
  const s = rs.subarray(32);
  return (
    Buffer.compare(r, ZERO) > 0 &&
    Buffer.compare(r, N) < 0 &&
    Buffer.compare(s, ZERO) > 0 &&
    Buffer.compare(s, HALF_N) <= 0
  );
}

/** The backend agrees with @noble/curves on fixed digests, and its signatures recover. */
function knownAnswer(backend: Backend, priv: Uint8Array, publicKey: Uint8Array): void {
  for (const seed of [1, 2, 3]) {
    const digest = new Uint8Array(32).fill(seed * 0x2f);
    const ours = backend.sign(digest, priv);
    const reference = javascript.sign(digest, priv);
    assert.ok(
      Buffer.from(ours.rs).equals(Buffer.from(reference.rs)) && ours.recovery === reference.recovery,
      `the ${backend.name} signer disagrees with the reference implementation`,
    );
    const recovered = backend.recover(digest, ours.rs, ours.recovery);
    assert.ok(
      Buffer.from(recovered).equals(Buffer.from(publicKey)),
      "signature does not recover to the signer",
    );
  }
}

export function createSigner(
  privateKey: Hex,
  options: { preferNative?: boolean; backend?: Backend } = {},
): Signer {
  const backend =
    options.backend ?? ((options.preferNative ?? true) ? (loadNative() ?? javascript) : javascript);
  const priv = hexToBytes(privateKey);
  const publicKey = backend.publicKey(priv);
  assert.ok(
    Buffer.from(publicKey).equals(Buffer.from(javascript.publicKey(priv))),
    `the ${backend.name} signer derives another public key`,
  );
  knownAnswer(backend, priv, publicKey);
  const address = privateKeyToAddress(privateKey);
  let signed = 0;
  return {
    address,
    backend: backend.name,
    signDigest(digest) {
      const digestBytes = hexToBytes(digest);
      assert.equal(digestBytes.length, 32, "digest must be 32 bytes");
      const { rs, recovery } = backend.sign(digestBytes, priv);
      assert.ok(wellFormed(rs, recovery), "the signer produced a malformed signature");
      if (signed++ % SAMPLE_EVERY === 0) {
        const recovered = backend.recover(digestBytes, rs, recovery);
        assert.ok(
          Buffer.from(recovered).equals(Buffer.from(publicKey)),
          "signature does not recover to the signer",
        );
      }
      const out = new Uint8Array(65);
      out.set(rs, 0);
      out[64] = 27 + recovery;
      return bytesToHex(out);
    },
  };
}
