import type { Db } from "../db/db.ts";
import type { RateLimitRefusal } from "../rate-limits/limiter.ts";
import { apiKeyDigest, isWellFormedApiKey } from "./format.ts";
import { Lru } from "./lru.ts";
import { type ActiveKey, findActiveKey, touchApiKeys } from "./store.ts";

/**
 * Resolves presented API keys to their records with a short-lived cache, so the authorize hot
 * path rarely reads the database. The cache lifetime bounds how long a revoked key keeps
 * working on another instance (≤ 5 s, DESIGN.md §3). `last_used_at` is written in batches.
 *
 * Valid keys and misses live in two separate bounded stores, so that no number of made-up keys
 * can push a valid key out: an attacker's misses only ever evict other misses. A valid key whose
 * cache lifetime is over stays known as "valid when last read", and is read again without
 * counting against anyone's budget of failed authentications (api-keys/check.ts); only keys the
 * instance has never seen valid need that budget. Concurrent reads of one key are one query.
 */
export interface ApiKeyResolver {
  /** What the cache knows of a presented key, without reading the database. */
  cached(presented: string): CachedKey;
  /**
   * Reads the key from the database and caches the answer. Concurrent loads of one key are one
   * read, and `guard` (the first caller's) runs once around it: when it refuses, nothing is read
   * and every caller waiting on that read gets the refusal.
   */
  load(presented: string, guard?: ReadGuard): Promise<KeyLoad>;
  /** Drops a cached key at once (this instance revoked it). */
  forget(keyId: number): void;
  /** Database reads of keys made so far (for tests and metrics). */
  lookups(): number;
  /** Writes pending `last_used_at` updates. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export type CachedKey =
  | { kind: "valid"; key: ActiveKey }
  /** Malformed, or a recent miss: refused without reading the database. */
  | { kind: "invalid" }
  /** Needs a read; `knownValid` when the key was valid when last read (its cache entry is only old). */
  | { kind: "unknown"; knownValid: boolean };

export type KeyLoad =
  | { kind: "valid"; key: ActiveKey }
  | { kind: "invalid" }
  /** The guard refused the read. */
  | { kind: "throttled"; refusal: RateLimitRefusal };

/** Admits a read (null) or refuses it; told when the key read turned out valid. */
export interface ReadGuard {
  admit(): Promise<RateLimitRefusal | null>;
  valid(): Promise<void>;
}

/** Valid keys kept per instance; only other valid keys can evict one. */
const MAX_VALID = 50_000;
/** Misses kept per instance, and for how long: a key never becomes valid after it was presented. */
const MAX_MISSES = 20_000;
const MISS_TTL_MS = 60_000;
const TOUCH_INTERVAL_MS = 5_000;

export function apiKeyResolver(db: Db, ttlMs: number, now: () => number = Date.now): ApiKeyResolver {
  const valid = new Lru<string, { key: ActiveKey; readAt: number }>(MAX_VALID);
  const misses = new Lru<string, number>(MAX_MISSES);
  const inFlight = new Map<string, Promise<KeyLoad>>();
  const used = new Set<number>();
  let lookups = 0;
  const timer = setInterval(() => void flush().catch(() => {}), TOUCH_INTERVAL_MS);
  timer.unref();

  async function flush() {
    const ids = [...used];
    used.clear();
    await touchApiKeys(db, ids);
  }

  async function guardedRead(digest: string, guard: ReadGuard | undefined): Promise<KeyLoad> {
    const refusal = guard ? await guard.admit() : null;
    if (refusal) return { kind: "throttled", refusal };
    const key = await read(digest);
    if (!key) return { kind: "invalid" };
    await guard?.valid();
    return { kind: "valid", key };
  }

  async function read(digest: string): Promise<ActiveKey | null> {
    lookups++;
    const readAt = now();
    const key = await findActiveKey(db, digest);
    if (key) {
      valid.set(digest, { key, readAt });
      misses.delete(digest);
    } else {
      valid.delete(digest);
      misses.set(digest, readAt + MISS_TTL_MS);
    }
    return key;
  }

  return {
    cached(presented) {
      if (!isWellFormedApiKey(presented)) return { kind: "invalid" };
      const digest = apiKeyDigest(presented);
      const t = now();
      const hit = valid.get(digest);
      if (hit && t - hit.readAt < ttlMs) {
        used.add(hit.key.id);
        return { kind: "valid", key: hit.key };
      }
      const missUntil = misses.get(digest);
      if (missUntil !== undefined) {
        if (missUntil > t) return { kind: "invalid" };
        misses.delete(digest);
      }
      return { kind: "unknown", knownValid: hit !== undefined };
    },
    async load(presented, guard) {
      if (!isWellFormedApiKey(presented)) return { kind: "invalid" };
      const digest = apiKeyDigest(presented);
      let pending = inFlight.get(digest);
      if (!pending) {
        pending = guardedRead(digest, guard).finally(() => inFlight.delete(digest));
        inFlight.set(digest, pending);
      }
      const outcome = await pending;
      if (outcome.kind === "valid") used.add(outcome.key.id);
      return outcome;
    },
    forget(keyId) {
      for (const [digest, entry] of [...valid.entries()]) {
        if (entry.key.id !== keyId) continue;
        valid.delete(digest);
        misses.set(digest, now() + MISS_TTL_MS);
      }
    },
    lookups: () => lookups,
    flush,
    async close() {
      clearInterval(timer);
      await flush().catch(() => {});
    },
  };
}
