import { type PollLoop, pollLoop, type WatcherLog } from "../chains/poll-loop.ts";
import type { Db } from "../db/db.ts";
import { checkpointDueProjects } from "../ledger/checkpoints.ts";
import { forgetExpiredReplays } from "./replays.ts";

export interface MaintenanceOptions {
  /** Between two passes; 0 disables the job. */
  intervalMs: number;
  /** Rows cleared per retention batch (one short transaction each). */
  batchSize: number;
  /** A project gets a ledger checkpoint once this many entries follow its latest one. */
  checkpointEvery: number;
  now: () => number;
}

/** Bounds on one pass, so that a backlog (an upgrade of a large database) drains over passes. */
const MAX_BATCHES_PER_PASS = 20;
const CHECKPOINT_PROJECTS_PER_PASS = 50;

export interface Maintenance {
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
  /** One pass, for tests: what it cleared and which projects it checkpointed. */
  pass(): Promise<{ forgotten: number; checkpointed: string[] }>;
}

/**
 * The background upkeep that keeps reads bounded: replays whose 24 hours are over are forgotten
 * (retention/replays.ts) and ledger checkpoints are written (ledger/checkpoints.ts). Every
 * instance runs it; both parts are safe to run side by side (SKIP LOCKED, and a table lock plus
 * a primary key), so no leader is needed.
 */
export function maintenance(db: Db, options: MaintenanceOptions): Maintenance {
  const pass = async () => {
    let forgotten = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
      const n = await forgetExpiredReplays(db, options.now(), options.batchSize);
      forgotten += n;
      if (n < options.batchSize) break;
    }
    const checkpointed = await checkpointDueProjects(
      db,
      options.checkpointEvery,
      CHECKPOINT_PROJECTS_PER_PASS,
    );
    return { forgotten, checkpointed };
  };
  let loop: PollLoop | null = null;
  return {
    start(log) {
      if (options.intervalMs === 0 || loop) return;
      loop = pollLoop(pass, { name: "maintenance", intervalMs: options.intervalMs, ...(log ? { log } : {}) });
      loop.start();
    },
    async stop() {
      await loop?.stop();
      loop = null;
    },
    pass,
  };
}
