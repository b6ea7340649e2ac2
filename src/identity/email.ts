import { createHash } from "node:crypto";

/**
 * The one way the service compares email addresses: at invitation (`POST /orgs/:orgId/members`),
 * at sign-in (a token's `email`) and for the local issuer. Two addresses are the same only when
 * they are equal after folding ASCII A–Z to a–z; nothing else is folded.
 *
 * Addresses with any character outside printable ASCII are refused rather than normalised,
 * because every Unicode folding merges addresses that different people may hold:
 * `toLowerCase` turns KELVIN SIGN (U+212A) into `k` and `İ` (U+0130) into `i` + a combining dot;
 * even NFC maps KELVIN SIGN to `K` (a canonical singleton), and NFKC maps fullwidth `ｋ` to `k`.
 * PostgreSQL's `lower()` (which the `developers.email` CHECK uses) depends on the database's
 * locale as well. Internationalised addresses (RFC 6531) are therefore not supported; their
 * domains may be written in punycode (`xn--…`).
 *
 * The `.invalid` top-level domain (RFC 2606: never a real mailbox) is refused too: the service
 * keeps it for the identities of tokens whose email it cannot trust (see `unverifiedEmailOf`).
 */
const SHAPE = /^[!-?A-~]{1,64}@[!-?A-~]{1,189}$/;
const RESERVED_DOMAIN = /(^|\.)invalid$/i;
const PLACEHOLDER_DOMAIN = "unverified.invalid";

/** The address in the form the service stores and compares, or null when it is refused. */
export function normalizeEmail(raw: string): string | null {
  if (raw.length > 254 || !SHAPE.test(raw)) return null;
  const domain = raw.slice(raw.indexOf("@") + 1);
  if (RESERVED_DOMAIN.test(domain)) return null;
  return raw.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));
}

/**
 * The stored address of an identity whose token carries no verified, comparable email: unique
 * per subject, in a domain that no invitation can name, so it never matches an invitation, an
 * operator's address or anyone else's record.
 */
export function unverifiedEmailOf(subject: string): string {
  const digest = createHash("sha256").update(subject).digest("hex").slice(0, 32);
  return `${digest}@${PLACEHOLDER_DOMAIN}`;
}

export function isUnverifiedEmail(email: string): boolean {
  return email.endsWith(`@${PLACEHOLDER_DOMAIN}`);
}
