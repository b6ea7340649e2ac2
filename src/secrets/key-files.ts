import { randomBytes } from "node:crypto";
import { chmodSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Secrets the embedded default generates once and keeps in DATA_DIR (the local signer key, the
 * local token issuer's key, the deposit seed, the key that seals stored secrets). The directory
 * is kept 0700 and the files 0600: anyone else on the host who could read them could sign
 * sponsorships or read every webhook secret. A `memory://` data dir keeps them in memory only,
 * for tests. In production the server refuses to start rather than generate them
 * (src/process/policy.ts), unless told otherwise.
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
  ensurePrivateDir(dataDir);
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

/** The secret `name` of DATA_DIR if it exists, without creating it. */
export function peekSecret(dataDir: string, name: string): string | null {
  if (dataDir.startsWith("memory://")) return memorySecrets.get(`${dataDir}/${name}`) ?? null;
  return readSecret(join(dataDir, name));
}

/**
 * Creates `dir` (and its parents) if missing, and makes it 0700 whether new or not: releases
 * before this one created DATA_DIR with the process's umask (0755 on most hosts). A directory
 * this user does not own (a volume mounted by someone else) cannot be changed and is left as
 * its owner set it.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  restrict(dir, 0o700);
}

function readSecret(path: string): string | null {
  try {
    const value = readFileSync(path, "utf8").trim();
    if (value === "") return null;
    // A key file copied in by hand, or written by an older release, may be readable by others.
    restrict(path, 0o600);
    return value;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

function restrict(path: string, mode: number): void {
  if ((statSync(path).mode & 0o777) === mode) return;
  try {
    chmodSync(path, mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") throw err;
  }
}

const memorySecrets = new Map<string, string>();
