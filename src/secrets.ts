import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Secrets the embedded default generates once and keeps in DATA_DIR (the local signer key, the
 * local token issuer's key, the deposit seed). Files are created 0600. A `memory://` data dir
 * keeps them in memory only, for tests.
 */
export function loadOrCreateSecret(dataDir: string, name: string, create: () => string): string {
  if (dataDir.startsWith("memory://")) {
    const cached = memorySecrets.get(`${dataDir}/${name}`);
    if (cached) return cached;
    const value = create();
    memorySecrets.set(`${dataDir}/${name}`, value);
    return value;
  }
  const path = join(dataDir, name);
  if (existsSync(path)) return readFileSync(path, "utf8").trim();
  mkdirSync(dataDir, { recursive: true });
  const value = create();
  // `wx` fails if another process created it meanwhile; then that one wins and we read it.
  try {
    writeFileSync(path, `${value}\n`, { mode: 0o600, flag: "wx" });
    return value;
  } catch {
    return readFileSync(path, "utf8").trim();
  }
}

const memorySecrets = new Map<string, string>();
