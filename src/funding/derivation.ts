import { randomBytes } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1";
import { HDKey } from "@scure/bip32";
import { type Address, bytesToHex, getAddress, keccak256 } from "viem";
import { loadOrCreateSecret } from "../secrets/key-files.ts";

/**
 * Deposit addresses are the non-hardened children `0/i` of an account-level extended public key
 * (`m/44'/60'/0'`), so the full path is `m/44'/60'/0'/0/i`. The service only ever holds the
 * public half: it can derive addresses but cannot spend what arrives at them.
 */
export interface DepositDeriver {
  addressAt(index: number): Address;
}

export const ACCOUNT_PATH = "m/44'/60'/0'";

export function depositDeriver(xpub: string): DepositDeriver {
  const account = HDKey.fromExtendedKey(xpub);
  if (account.privateKey) throw new Error("DEPOSIT_XPUB must be a public key");
  const external = account.deriveChild(0);
  return {
    addressAt(index) {
      if (!Number.isInteger(index) || index < 0 || index >= 2 ** 31) throw new Error("bad derivation index");
      const child = external.deriveChild(index);
      return publicKeyToAddress(child.publicKey!);
    },
  };
}

/**
 * The embedded default: a seed generated once into DATA_DIR (back it up: it controls the
 * deposits), from which the account xpub is taken. Production passes DEPOSIT_XPUB instead.
 */
export function xpubFromLocalSeed(dataDir: string): string {
  const seedHex = loadOrCreateSecret(dataDir, "deposit-seed.hex", () => randomBytes(32).toString("hex"));
  return HDKey.fromMasterSeed(Buffer.from(seedHex, "hex")).derive(ACCOUNT_PATH).publicExtendedKey;
}

function publicKeyToAddress(compressed: Uint8Array): Address {
  const uncompressed = secp256k1.ProjectivePoint.fromHex(compressed).toRawBytes(false);
  const hash = keccak256(bytesToHex(uncompressed.subarray(1)));
  return getAddress(`0x${hash.slice(-40)}`);
}
