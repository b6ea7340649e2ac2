/**
 * Webhook signatures, as the Standard Webhooks specification defines them
 * (https://www.standardwebhooks.com), so that receivers can verify with its libraries or with a
 * few lines of any language's HMAC:
 *
 * - `webhook-id`: the message id (an event's id, stable across retries; an approval request's id);
 * - `webhook-timestamp`: Unix seconds when this attempt was signed;
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, where key is
 *   the secret's bytes (`whsec_<base64>`); several space-separated signatures while a rotated
 *   secret is still honoured.
 *
 * Signing the id with the timestamp and the body means a captured request cannot be replayed
 * under another id or, once the receiver's tolerance window has passed, at all.
 */
import { createHmac, randomBytes } from "node:crypto";

export const SECRET_PREFIX = "whsec_";

/** A fresh signing secret: 32 random bytes, `whsec_` + base64. */
export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString("base64");
}

/** One `v1,<base64>` signature of the message with the secret. */
export function sign(secret: string, messageId: string, timestampSec: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
  const mac = createHmac("sha256", key).update(`${messageId}.${timestampSec}.${body}`).digest("base64");
  return `v1,${mac}`;
}

/** The three headers of a signed request, one signature per secret given (newest first). */
export function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  timestampSec: number,
  body: string,
): Record<string, string> {
  return {
    "content-type": "application/json",
    "webhook-id": messageId,
    "webhook-timestamp": String(timestampSec),
    "webhook-signature": secrets.map((s) => sign(s, messageId, timestampSec, body)).join(" "),
  };
}
