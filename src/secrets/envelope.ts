import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";

/**
 * Secrets the service must be able to read back (webhook signing secrets: it computes HMACs with
 * them, so a digest cannot do) are stored sealed with AES-256-GCM under a key from the
 * environment (SECRETS_ENCRYPTION_KEY). A copy of the database alone then reveals none of them.
 *
 * A sealed value is one line of ASCII:
 *
 *     v1:<keyId>:<iv>:<ciphertext and 16-byte tag>      (iv and ciphertext base64url, no padding)
 *
 * - `v1` names this layout, so a later one can be told apart and read beside it.
 * - `keyId` names the key that sealed it (derived from the key, see keyIdOf), so that after a
 *   rotation the service knows which of its keys opens a value, and an operator can count the
 *   values still sealed under an old key before removing it.
 * - The additional authenticated data is the header (`v1:<keyId>`) and the value's *binding*:
 *   the table and row it belongs to (`webhook_endpoints:42`). A sealed value copied into another
 *   row, another project's for instance, fails authentication there instead of becoming that
 *   row's secret.
 *
 * Pure apart from the random IV; opening answers a value, never throws, for a wrong key, a
 * foreign row or a tampered value.
 */

export const SEALED_PREFIX = "v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

export interface SealingKey {
  /** Eight base64url characters that name the key without revealing it. */
  readonly id: string;
  readonly bytes: Buffer;
}

/** The key that seals, and older keys that still open what they sealed. */
export interface Keyring {
  readonly current: SealingKey;
  readonly previous: readonly SealingKey[];
}

export type Opened =
  | { ok: true; plaintext: string; keyId: string }
  | { ok: false; reason: "not_sealed" | "unknown_key" | "not_authentic" };

/** Why a value could not be opened, in words for a log line (never the value). */
export const OPEN_FAILURES: Record<Extract<Opened, { ok: false }>["reason"], string> = {
  not_sealed: "the stored value is not a sealed secret",
  unknown_key:
    "it was sealed under a key that is not configured (SECRETS_ENCRYPTION_KEY or SECRETS_ENCRYPTION_KEYS_PREVIOUS)",
  not_authentic: "it does not authenticate: it was altered, or copied from another row",
};

/**
 * A key's id: the first 6 bytes of HMAC-SHA256(key, a fixed label). One-way, so the id can be
 * logged and stored; 48 bits keep a handful of keys apart.
 */
export function keyIdOf(bytes: Buffer): string {
  return createHmac("sha256", bytes)
    .update("gss secrets key id")
    .digest()
    .subarray(0, 6)
    .toString("base64url");
}

export function sealingKey(bytes: Buffer): SealingKey {
  if (bytes.length !== KEY_BYTES) throw new Error(`a sealing key is ${KEY_BYTES} bytes`);
  return { id: keyIdOf(bytes), bytes };
}

/** A keyring of `current` and `previous` (duplicates, the current key among them, dropped). */
export function keyring(current: Buffer, previous: readonly Buffer[] = []): Keyring {
  const ring = sealingKey(current);
  const seen = new Set([ring.id]);
  const older: SealingKey[] = [];
  for (const bytes of previous) {
    const key = sealingKey(bytes);
    if (seen.has(key.id)) continue;
    seen.add(key.id);
    older.push(key);
  }
  return { current: ring, previous: older };
}

export function isSealed(value: string): boolean {
  return value.startsWith(SEALED_PREFIX);
}

/** Whether `value` is sealed under the ring's current key (nothing to re-seal). */
export function sealedUnderCurrent(ring: Keyring, value: string): boolean {
  return value.startsWith(`${SEALED_PREFIX}${ring.current.id}:`);
}

/** Seals `plaintext` under the current key, bound to `binding` (the table and row that hold it). */
export function seal(ring: Keyring, plaintext: string, binding: string): string {
  const { id, bytes } = ring.current;
  const header = `${SEALED_PREFIX}${id}`;
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", bytes, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(additionalData(header, binding));
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return `${header}:${iv.toString("base64url")}:${body.toString("base64url")}`;
}

/** Opens a value sealed by `seal` with the same binding, under any key of the ring. */
export function open(ring: Keyring, sealed: string, binding: string): Opened {
  const parts = sealed.split(":");
  if (parts.length !== 4 || `${parts[0]}:` !== SEALED_PREFIX) return { ok: false, reason: "not_sealed" };
  const [, keyId, ivText, bodyText] = parts as [string, string, string, string];
  const key = [ring.current, ...ring.previous].find((k) => k.id === keyId);
  if (!key) return { ok: false, reason: "unknown_key" };
  const iv = Buffer.from(ivText, "base64url");
  const body = Buffer.from(bodyText, "base64url");
  if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return { ok: false, reason: "not_authentic" };
  try {
    const decipher = createDecipheriv("aes-256-gcm", key.bytes, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(additionalData(`${SEALED_PREFIX}${keyId}`, binding));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    const plain = Buffer.concat([
      decipher.update(body.subarray(0, body.length - TAG_BYTES)),
      decipher.final(),
    ]);
    return { ok: true, plaintext: plain.toString("utf8"), keyId };
  } catch {
    return { ok: false, reason: "not_authentic" };
  }
}

function additionalData(header: string, binding: string): Buffer {
  return Buffer.from(`${header}|${binding}`, "utf8");
}

/**
 * A 32-byte key written as 64 hex characters or as base64 / base64url (43 characters, or 44 with
 * its `=`): what `openssl rand -base64 32` or `-hex 32` prints. Throws without quoting the value.
 */
export function decodeKey(text: string): Buffer {
  const v = text.trim();
  let bytes: Buffer | null = null;
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(v)) bytes = Buffer.from(v.replace(/^0x/, ""), "hex");
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(v)) bytes = Buffer.from(v.replace(/=$/, ""), "base64url");
  if (bytes === null || bytes.length !== KEY_BYTES) {
    throw new Error(`must be ${KEY_BYTES} bytes, as 64 hex characters or base64 (openssl rand -base64 32)`);
  }
  if (bytes.every((b) => b === 0)) throw new Error("must not be all zeros (a placeholder left in?)");
  return bytes;
}
