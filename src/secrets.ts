import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Secrets the embedded default generates once and keeps in DATA_DIR (the local signer key, the
 * local token issuer's key, the deposit seed). Files are created 0600. A `memory://` data dir
 * keeps them in memory only, for tests. In production the server refuses to start rather than
 * generate the signer key or the deposit seed (src/process/policy.ts), unless told otherwise.
 *
 * Several processes may start at once on one DATA_DIR (cluster workers, instances sharing a
 * volume with PostgreSQL as the store): exactly one value wins and every process reads it whole.
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
  const existing = readSecret(path);
  if (existing !== null) return existing;
  mkdirSync(dataDir, { recursive: true });
  const value = create();
  // Written whole under a private name, then linked into place: link() fails if the name exists,
  // so the first process wins, and no process can read a file that is created but not yet
  // written (which `writeFile` with `wx` alone would allow).
  const temp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(temp, `${value}\n`, { mode: 0o600, flag: "wx" });
  try {
    linkSync(temp, path);
    return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    // Another process won meanwhile: its value is the one.
    const winner = readSecret(path);
    if (winner === null) throw new Error(`${path} exists but is empty`);
    return winner;
  } finally {
    unlinkSync(temp);
  }
}

function readSecret(path: string): string | null {
  try {
    const value = readFileSync(path, "utf8").trim();
    return value === "" ? null : value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

const memorySecrets = new Map<string, string>();
