import { closeSync, fsyncSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

/**
 * One process per embedded data directory. PGlite keeps the whole database in this process's
 * memory and writes it back to DATA_DIR: a second process on the same directory does not see the
 * first one's writes (both hand out the same ids, one overwrites the other) or crashes inside the
 * WASM runtime. So the server takes this lock before it opens PGlite, and a second server refuses
 * to start, naming the holder.
 *
 * The lock is a file created with O_EXCL (`wx`): creating it is the atomic test-and-set, on any
 * local file system. It records who holds it; it is removed when the holder stops, and a holder
 * that died without removing it (SIGKILL, a crash, a power cut) is recognised as gone when it
 * was on this host and its process is no longer there. A holder on another host (a data
 * directory on a shared volume) cannot be checked from here: the lock is refused, and the
 * message says which file to remove once that host is known to be stopped.
 */

export const LOCK_FILE = "service.lock";

export interface LockHolder {
  pid: number;
  host: string;
  /** When the holder took the lock (ISO 8601). */
  startedAt: string;
  /** The holder's process start time in clock ticks since boot (Linux), to tell a reused pid. */
  processStart?: number;
}

export interface DataDirLock {
  readonly path: string;
  readonly holder: LockHolder;
  /** Removes the lock file if it is still ours. Safe to call more than once. */
  release(): void;
}

export class DataDirLocked extends Error {
  constructor(
    readonly path: string,
    readonly holder: LockHolder | null,
  ) {
    super(
      holder
        ? `the data directory is in use by process ${holder.pid} on ${holder.host} (started ${holder.startedAt}); ` +
            `one process per DATA_DIR: stop that one, or use another DATA_DIR` +
            (holder.host === hostname() ? "" : `; if that host is known to be stopped, remove ${path}`)
        : `the data directory is being locked by another process right now (${path}); one process per DATA_DIR`,
    );
    this.name = "DataDirLocked";
  }
}

/** Locks held by this process, so a second acquire in the same process is refused as well. */
const heldHere = new Set<string>();

/**
 * Takes the lock on `dataDir` (which must exist) or throws DataDirLocked. A stale lock (its
 * holder's process is gone from this host) is taken over.
 */
export function acquireDataDirLock(dataDir: string, now: () => Date = () => new Date()): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  if (heldHere.has(path)) throw new DataDirLocked(path, ownHolder(now));
  // Three tries at most: as is, after a stale lock was removed, after a release seen meanwhile.
  for (let attempt = 0; attempt < 3; attempt++) {
    const holder = ownHolder(now);
    if (createExclusive(path, holder)) return held(path, holder);
    const current = readHolder(path);
    if (current === "gone") continue;
    if (current.holder === null) {
      // Created but not yet written (its holder is between open and write), or left so by a
      // crash right there. Young: someone is taking it now. Old: nobody will finish it.
      if (ageMs(path) < 5_000) throw new DataDirLocked(path, null);
    } else if (!isStale(current.holder)) {
      throw new DataDirLocked(path, current.holder);
    }
    takeOver(path, current.text);
  }
  throw new DataDirLocked(path, null);
}

/** O_CREAT | O_EXCL: true when this call created the file (and wrote the holder into it). */
function createExclusive(path: string, holder: LockHolder): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
  try {
    writeSync(fd, `${JSON.stringify(holder)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

function held(path: string, holder: LockHolder): DataDirLock {
  heldHere.add(path);
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    heldHere.delete(path);
    process.removeListener("exit", release);
    // Only our own lock: after a takeover (this process was judged gone) it is someone else's.
    const onDisk = readHolder(path);
    if (
      onDisk !== "gone" &&
      onDisk.holder?.pid === holder.pid &&
      onDisk.holder.startedAt === holder.startedAt
    ) {
      removeFile(path);
    }
  };
  // A process that exits without shutting down (process.exit after a failure) still lets go.
  process.on("exit", release);
  return { path, holder, release };
}

/**
 * Removes a stale lock. Two processes may find the same stale lock at once; without care the
 * slower one would remove the lock the faster one has just created. So removal happens under a
 * second O_EXCL file, and only if the lock still has the content that was judged stale.
 */
function takeOver(path: string, staleText: string) {
  const guard = `${path}.takeover`;
  let fd: number;
  try {
    fd = openSync(guard, "wx", 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    // Another process is taking over; a guard left by a crash mid-takeover expires.
    if (ageMs(guard) > 10_000) removeFile(guard);
    else throw new DataDirLocked(path, null);
    return;
  }
  try {
    if (rawText(path) === staleText) removeFile(path);
  } finally {
    closeSync(fd);
    removeFile(guard);
  }
}

/** Whether the recorded holder is certainly gone: same host, and no such process (or a new one under its pid). */
export function isStale(holder: LockHolder, host = hostname()): boolean {
  if (holder.host !== host) return false;
  // Our own pid, yet not a lock this process holds (acquire checked): a previous run that had
  // the same pid, as a container's PID 1 has after a restart.
  if (holder.pid === process.pid) return true;
  if (!processAlive(holder.pid)) return true;
  // The pid exists; on Linux, a different start time means the pid was reused by another process.
  const start = processStartTicks(holder.pid);
  return holder.processStart !== undefined && start !== undefined && start !== holder.processStart;
}

function ownHolder(now: () => Date): LockHolder {
  const processStart = processStartTicks(process.pid);
  return {
    pid: process.pid,
    host: hostname(),
    startedAt: now().toISOString(),
    ...(processStart !== undefined ? { processStart } : {}),
  };
}

function rawText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

/** The lock's holder and raw text; holder null when the text is not a holder (yet). */
function readHolder(path: string): { holder: LockHolder | null; text: string } | "gone" {
  const text = rawText(path);
  if (text === null) return "gone";
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (
      typeof parsed.pid === "number" &&
      typeof parsed.host === "string" &&
      typeof parsed.startedAt === "string"
    ) {
      return { holder: parsed as LockHolder, text };
    }
  } catch {
    // Falls through.
  }
  return { holder: null, text };
}

function removeFile(path: string) {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/** Whether a process with this pid exists (EPERM: it does, under another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Field 22 of /proc/<pid>/stat (start time, clock ticks after boot); undefined off Linux. */
function processStartTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[19]);
    return Number.isFinite(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}
