import { type PollLoop, pollLoop, type WatcherLog } from "../chains/poll-loop.ts";
import type { Db } from "../db/db.ts";
import { checkpointDueProjects } from "../ledger/checkpoints.ts";
import { foldOldChainOperations } from "./chain-operations.ts";
import { type TableUpkeep, vacuumChurnedTables } from "./embedded-vacuum.ts";
import { forgetOldRefusals } from "./refusals.ts";
import { forgetExpiredReplays } from "./replays.ts";
import { forgetOldSenderDays } from "./sender-days.ts";
import { forgetFinishedDeliveries, forgetOldEvents, type OutboxPosition } from "./webhooks.ts";

export interface MaintenanceOptions {
  /** Between two passes; 0 disables the job. */
  intervalMs: number;
  /** Rows cleared per retention batch (one short transaction each). */
  batchSize: number;
  /** A project gets a ledger checkpoint once this many entries follow its latest one. */
  checkpointEvery: number;
  /** Days finished webhook deliveries and outbox events are kept (WEBHOOK_RETENTION_DAYS). */
  webhookRetentionDays: number;
  /** Days a detailed refusal is kept (REFUSAL_RETENTION_DAYS; 14 unless given). */
  refusalRetentionDays?: number;
  /** Days a fully billed paid operation keeps its own row (CHAIN_OPERATION_RETENTION_DAYS; 7 unless given). */
  chainOperationRetentionDays?: number;
  now: () => number;
}

/** Bounds on one pass, so that a backlog (an upgrade of a large database) drains over passes. */
const MAX_BATCHES_PER_PASS = 20;
const CHECKPOINT_PROJECTS_PER_PASS = 50;

export interface Maintenance {
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
  /** One pass, for tests: what it cleared and removed, and which projects it checkpointed. */
  pass(): Promise<MaintenancePass>;
}

export interface MaintenancePass {
  /** Sponsorships whose replay was forgotten. */
  forgotten: number;
  /** Finished webhook deliveries removed (with their attempt logs). */
  deliveriesRemoved: number;
  /** Outbox events removed. */
  eventsRemoved: number;
  /** Detailed refusals removed (their daily counts stay). */
  refusalsRemoved: number;
  /** Paid operations folded into their paymaster's totals. */
  chainOperationsFolded: number;
  /** Per-sender day counts of days that are final removed (retention/sender-days.ts). */
  senderDaysForgotten: number;
  checkpointed: string[];
  /** Embedded store only: the tables this pass vacuumed or analysed (retention/embedded-vacuum.ts). */
  vacuumed: TableUpkeep[];
}

/**
 * The background upkeep that keeps reads and storage bounded: replays whose 24 hours are over are
 * forgotten (retention/replays.ts), finished webhook deliveries and old outbox events are removed
 * (retention/webhooks.ts), detailed refusals past REFUSAL_RETENTION_DAYS are removed
 * (retention/refusals.ts), paid operations past CHAIN_OPERATION_RETENTION_DAYS are folded into
 * their paymaster's totals (retention/chain-operations.ts), the per-sender day counts of days that
 * are final are removed (retention/sender-days.ts), and ledger checkpoints are written
 * (ledger/checkpoints.ts). Every instance runs it; every part is safe to run side by side (SKIP
 * LOCKED, and a table lock plus a primary key), so no leader is needed. On the embedded store,
 * which has no autovacuum, it last vacuums and analyses the tables that churned
 * (retention/embedded-vacuum.ts).
 */
export function maintenance(db: Db, options: MaintenanceOptions): Maintenance {
  const { batchSize, webhookRetentionDays } = options;
  // A step that removes at most batchSize rows per call, called until one comes back short (or
  // the pass's bound): what it removed in all.
  const drain = async (step: () => Promise<number>) => {
    let total = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
      const n = await step();
      total += n;
      if (n < batchSize) break;
    }
    return total;
  };
  // This instance's place in its walk over the expired events: a pass goes on where the last one
  // stopped, so events that must stay (pending deliveries) are not re-read by every pass.
  let outboxPosition: OutboxPosition | null = null;
  // Likewise in its walk over the projects due for a checkpoint (ledger/checkpoints.ts).
  let checkpointPosition = "";
  let log: WatcherLog | undefined;
  const pass = async (): Promise<MaintenancePass> => {
    const forgotten = await drain(() => forgetExpiredReplays(db, options.now(), batchSize));
    // Deliveries first: an event can only go once its last delivery has.
    const deliveriesRemoved = await drain(() =>
      forgetFinishedDeliveries(db, options.now(), webhookRetentionDays, batchSize),
    );
    let eventsRemoved = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
      const step = await forgetOldEvents(db, options.now(), webhookRetentionDays, batchSize, outboxPosition);
      eventsRemoved += step.removed;
      outboxPosition = step.next;
      if (step.next === null) break;
    }
    const refusalsRemoved = await drain(() =>
      forgetOldRefusals(db, options.now(), options.refusalRetentionDays ?? 14, batchSize),
    );
    const chainOperationsFolded = await drain(() =>
      foldOldChainOperations(db, options.now(), options.chainOperationRetentionDays ?? 7, batchSize),
    );
    const senderDaysForgotten = await drain(() =>
      forgetOldSenderDays(db, options.now(), options.chainOperationRetentionDays ?? 7, batchSize),
    );
    const { checkpointed } = await checkpointDueProjects(
      db,
      options.checkpointEvery,
      CHECKPOINT_PROJECTS_PER_PASS,
      checkpointPosition,
      (next) => {
        checkpointPosition = next;
      },
    );
    // Last, after the retention steps above have made their dead rows.
    const vacuumed = await vacuumChurnedTables(db);
    for (const v of vacuumed) log?.info(v, "embedded store: table vacuumed (no autovacuum in PGlite)");
    return {
      forgotten,
      deliveriesRemoved,
      eventsRemoved,
      refusalsRemoved,
      chainOperationsFolded,
      senderDaysForgotten,
      checkpointed,
      vacuumed,
    };
  };
  let loop: PollLoop | null = null;
  return {
    start(l) {
      if (options.intervalMs === 0 || loop) return;
      log = l;
      loop = pollLoop(pass, {
        name: "maintenance",
        intervalMs: options.intervalMs,
        ...(l ? { log: l } : {}),
      });
      loop.start();
    },
    async stop() {
      await loop?.stop();
      loop = null;
    },
    pass,
  };
}
