import { hash, randomInt } from "node:crypto";

/**
 * API keys look like `gsk_` + 40 random base62 characters + a 6-character checksum. The checksum
 * lets the service refuse a mistyped or made-up key without touching the database; it is not a
 * secret. Only the SHA-256 digest of the whole key is ever stored.
 */
export const KEY_PREFIX = "gsk_";
const BODY_LENGTH = 40;
const CHECKSUM_LENGTH = 6;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);
export const PREVIEW_LENGTH = 12;

export type Scope = "sponsor" | "read" | "manage";
export const SCOPES: readonly Scope[] = ["sponsor", "read", "manage"];

export function generateApiKey(): string {
  let body = "";
  for (let i = 0; i < BODY_LENGTH; i++) body += BASE62[randomInt(62)];
  return `${KEY_PREFIX}${body}${checksum(body)}`;
}

export function isWellFormedApiKey(key: string): boolean {
  if (!KEY_SHAPE.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return key.endsWith(checksum(body));
}

export function apiKeyDigest(key: string): string {
  return hash("sha256", key, "hex");
}

export function apiKeyPreview(key: string): string {
  return key.slice(0, PREVIEW_LENGTH);
}

function checksum(body: string): string {
  const digest = hash("sha256", `gsk-checksum:${body}`, "buffer");
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) out += BASE62[digest[i]! % 62];
  return out;
}
