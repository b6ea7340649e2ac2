import type { AuthFailureLimiter } from "../rate-limits/failed-auth.ts";
import type { ApiKeyResolver, KeyLoad } from "./resolver.ts";

/** A presented key: valid, invalid, or refused unread (the address is over its failure budget). */
export type KeyCheck = KeyLoad;

/**
 * Checks an API key presented by a client address, bounding the database reads an
 * unauthenticated caller can cause (the one way in for keys: the REST hook and /rpc).
 *
 * - A key the cache holds as valid is served, whatever the address's budget.
 * - A key that was valid when last read is read again, free of the budget: nobody can present
 *   it without holding it.
 * - Anything else (malformed, a recent miss, a key this instance has never seen) first counts
 *   as a failed authentication of the address; over the budget, it is refused unread. A key
 *   that turns out valid gives its count back. Concurrent requests with one key share one read
 *   and one count.
 *
 * A valid key this instance has never seen, presented from an address over its budget, is the
 * one case refused (429, until the window ends): telling it apart from a made-up key would take
 * the very read the budget exists to refuse.
 */
export async function checkApiKey(
  deps: { apiKeys: ApiKeyResolver; authFailures: AuthFailureLimiter },
  presented: string,
  clientAddress: string,
): Promise<KeyCheck> {
  const { apiKeys, authFailures } = deps;
  const seen = apiKeys.cached(presented);
  if (seen.kind === "valid") return seen;
  if (seen.kind === "invalid") return failed(authFailures, clientAddress);
  if (seen.knownValid) {
    const outcome = await apiKeys.load(presented);
    // Revoked since it was last read: a failed authentication like any other.
    return outcome.kind === "invalid" ? failed(authFailures, clientAddress) : outcome;
  }
  return apiKeys.load(presented, {
    admit: () => authFailures.reserve(clientAddress),
    valid: () => authFailures.release(clientAddress),
  });
}

async function failed(authFailures: AuthFailureLimiter, clientAddress: string): Promise<KeyCheck> {
  const refusal = await authFailures.reserve(clientAddress);
  return refusal ? { kind: "throttled", refusal } : { kind: "invalid" };
}
