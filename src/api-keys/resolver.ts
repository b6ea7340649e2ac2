import type { Db } from "../db/db.ts";
import { apiKeyDigest, isWellFormedApiKey } from "./format.ts";
import { type ActiveKey, findActiveKey, touchApiKeys } from "./store.ts";

/**
 * Resolves presented API keys to their records with a short-lived cache, so the authorize hot
 * path rarely reads the database. The cache lifetime bounds how long a revoked key keeps
 * working on another instance (≤ 5 s, DESIGN.md §3). `last_used_at` is written in batches.
 */
export interface ApiKeyResolver {
  resolve(key: string): Promise<ActiveKey | null>;
  /** Drops a cached key at once (this instance revoked it). */
  forget(keyId: number): void;
  /** Writes pending `last_used_at` updates. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

const MAX_CACHED = 50_000;
const TOUCH_INTERVAL_MS = 5_000;

export function apiKeyResolver(db: Db, ttlMs: number, now: () => number = Date.now): ApiKeyResolver {
  const cache = new Map<string, { key: ActiveKey | null; expiresAt: number }>();
  const used = new Set<number>();
  const timer = setInterval(() => void flush().catch(() => {}), TOUCH_INTERVAL_MS);
  timer.unref();

  async function flush() {
    const ids = [...used];
    used.clear();
    await touchApiKeys(db, ids);
  }

  return {
    async resolve(presented) {
      if (!isWellFormedApiKey(presented)) return null;
      const digest = apiKeyDigest(presented);
      const t = now();
      let hit = cache.get(digest);
      if (!hit || hit.expiresAt <= t) {
        if (cache.size >= MAX_CACHED) cache.clear();
        hit = { key: await findActiveKey(db, digest), expiresAt: t + ttlMs };
        cache.set(digest, hit);
      }
      if (hit.key) used.add(hit.key.id);
      return hit.key;
    },
    forget(keyId) {
      for (const [digest, entry] of cache) if (entry.key?.id === keyId) cache.delete(digest);
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush().catch(() => {});
    },
  };
}
