import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";
import { servePrimaryMetrics } from "../metrics/cluster.ts";
import { EXIT_FAILURE } from "./startup.ts";

/**
 * Cluster mode (WORKERS > 1): this primary forks the workers, each of which runs the whole
 * service (server.ts) and listens on the same port (the primary accepts connections and hands
 * them out in turn). The primary itself runs no HTTP and opens no store after its preflight.
 *
 * - A worker that dies after it was listening is replaced, after a pause that grows while workers
 *   keep dying soon after they start (1 s, doubling to 30 s), so a crash loop does not spin.
 * - A worker that exits before it listens means start-up itself fails (each worker would fail the
 *   same way): the primary stops the others and exits 1. The worker has logged why.
 * - SIGTERM or SIGINT: the primary sends SIGTERM to every worker, each drains as a single process
 *   does, and the primary exits 0 when all exited 0; 1 if any did not, or if they are not all
 *   gone within SHUTDOWN_TIMEOUT_MS (plus a second for the message to travel), then SIGKILLed.
 *
 * - /metrics, whichever worker a scrape reaches, is the sum over the workers (metrics/cluster.ts).
 *
 * Log lines: pino writes this process's own `pid` on every line, so a line about a worker names
 * that worker's process `workerPid` (one key, one meaning; a JSON object with a key twice is read
 * differently by different parsers).
 *
 * Worker i is started with GSS_WORKER_INDEX=i (1-based) and a replacement gets the index of the
 * worker it replaces, so "worker 1" always exists: it alone starts the chain watchers.
 */

export const WORKER_INDEX_ENV = "GSS_WORKER_INDEX";

export interface PrimaryOptions {
  workers: number;
  shutdownTimeoutMs: number;
  log: Logger;
  /** The script the workers run (server.js); default: this process's own. */
  exec?: string;
  /** Ends the process (process.exit by default; the server's waits for its log, process/log.ts). */
  exit?: (code: number) => void;
}

/** The 1-based index of this worker, or null in a primary or a single process. */
export function workerIndex(): number | null {
  if (!cluster.isWorker) return null;
  const index = Number(process.env[WORKER_INDEX_ENV]);
  return Number.isInteger(index) && index > 0 ? index : null;
}

const RESTART_MIN_MS = 1_000;
const RESTART_MAX_MS = 30_000;
/** A worker that lived this long resets its slot's restart delay. */
const HEALTHY_AFTER_MS = 60_000;

interface Slot {
  index: number;
  worker: Worker | null;
  listening: boolean;
  startedAt: number;
  restartDelayMs: number;
  restartTimer: NodeJS.Timeout | null;
}

export function runPrimary({
  workers,
  shutdownTimeoutMs,
  log,
  exec,
  exit = (code) => process.exit(code),
}: PrimaryOptions): void {
  if (exec) cluster.setupPrimary({ exec });
  // A scrape reaching any worker answers for all of them.
  servePrimaryMetrics();
  const slots: Slot[] = Array.from({ length: workers }, (_, i) => ({
    index: i + 1,
    worker: null,
    listening: false,
    startedAt: 0,
    restartDelayMs: RESTART_MIN_MS,
    restartTimer: null,
  }));
  let stopping = false;
  let exitCode = 0;

  const fork = (slot: Slot) => {
    slot.restartTimer = null;
    slot.listening = false;
    slot.startedAt = Date.now();
    const worker = cluster.fork({ [WORKER_INDEX_ENV]: String(slot.index) });
    slot.worker = worker;
    worker.once("listening", () => {
      slot.listening = true;
      if (slots.every((s) => s.listening)) log.info({ workers }, "all workers listening");
    });
    worker.once("exit", (code, signal) => onExit(slot, worker, code, signal));
  };

  const alive = () => slots.filter((s) => s.worker !== null);

  const onExit = (slot: Slot, worker: Worker, code: number | null, signal: string | null) => {
    if (slot.worker !== worker) return;
    slot.worker = null;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    if (stopping) {
      if (code !== 0) exitCode = EXIT_FAILURE;
      log.info({ worker: slot.index, workerPid: worker.process.pid, code, signal }, "worker stopped");
      if (alive().length === 0) finish();
      return;
    }
    if (!slot.listening) {
      log.error(
        { worker: slot.index, workerPid: worker.process.pid, code, signal },
        `worker ${slot.index} exited during start-up (${how}): stopping`,
      );
      stop("a worker failed to start", EXIT_FAILURE);
      return;
    }
    const lived = Date.now() - slot.startedAt;
    if (lived >= HEALTHY_AFTER_MS) slot.restartDelayMs = RESTART_MIN_MS;
    const delay = slot.restartDelayMs;
    slot.restartDelayMs = Math.min(RESTART_MAX_MS, slot.restartDelayMs * 2);
    log.error(
      { worker: slot.index, workerPid: worker.process.pid, code, signal, restartInMs: delay },
      `worker ${slot.index} died (${how}): restarting it`,
    );
    slot.restartTimer = setTimeout(() => fork(slot), delay);
  };

  let killTimer: NodeJS.Timeout | null = null;
  const stop = (reason: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ reason, workers: alive().length, timeoutMs: shutdownTimeoutMs }, "stopping workers");
    for (const slot of slots) {
      if (slot.restartTimer) clearTimeout(slot.restartTimer);
      slot.restartTimer = null;
    }
    for (const slot of alive()) slot.worker!.process.kill("SIGTERM");
    if (alive().length === 0) {
      finish();
      return;
    }
    // Each worker bounds its own drain by SHUTDOWN_TIMEOUT_MS; this one is for a worker that
    // cannot even do that (stuck in a busy loop).
    killTimer = setTimeout(() => {
      const left = alive();
      log.error(
        { workers: left.map((s) => s.index) },
        `workers still running ${shutdownTimeoutMs + 1000} ms after SIGTERM: killing them`,
      );
      for (const slot of left) slot.worker!.process.kill("SIGKILL");
      exitCode = EXIT_FAILURE;
    }, shutdownTimeoutMs + 1000);
  };

  const finish = () => {
    if (killTimer) clearTimeout(killTimer);
    log.info({ code: exitCode }, "stopped");
    exit(exitCode);
  };

  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => stop(signal));
  for (const slot of slots) fork(slot);
}
