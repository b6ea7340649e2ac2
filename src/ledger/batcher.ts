import type { Queryable } from "../db/db.ts";
import { type Reservation, type ReserveOutcome, reserveMany } from "./ledger.ts";

/**
 * Groups concurrent reservations of the same project into one database call. Every reservation
 * of a project serialises on the project's row until its transaction commits (and its commit
 * record is flushed), so one call per request caps a busy project at one commit per flush. Here a
 * project has at most one call in flight; whatever arrives meanwhile goes in the next call. An
 * idle project pays no delay: a request that finds nothing in flight is sent at once.
 */
export interface ReservationBatcher {
  reserve(r: Reservation): Promise<ReserveOutcome>;
}

const MAX_BATCH = 256;

interface Waiting {
  reservation: Reservation;
  resolve(outcome: ReserveOutcome): void;
  reject(err: unknown): void;
}

export function reservationBatcher(db: Queryable): ReservationBatcher {
  const queues = new Map<string, Waiting[]>();
  const inFlight = new Set<string>();

  const scheduled = new Set<string>();
  function schedule(projectId: string) {
    if (scheduled.has(projectId)) return;
    scheduled.add(projectId);
    setImmediate(() => {
      scheduled.delete(projectId);
      void flush(projectId);
    });
  }

  async function flush(projectId: string): Promise<void> {
    const queue = queues.get(projectId);
    if (!queue || queue.length === 0) {
      queues.delete(projectId);
      return;
    }
    const batch = queue.splice(0, MAX_BATCH);
    inFlight.add(projectId);
    try {
      const outcomes = await reserveMany(
        db,
        projectId,
        batch.map((w) => w.reservation),
      );
      for (const [i, w] of batch.entries()) w.resolve(outcomes[i]!);
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      inFlight.delete(projectId);
      // Through the event loop, so requests that arrived meanwhile are parsed and join the next
      // batch even when the store answers without yielding (PGlite runs in this thread).
      schedule(projectId);
    }
  }

  return {
    reserve(reservation) {
      return new Promise<ReserveOutcome>((resolve, reject) => {
        const queue = queues.get(reservation.projectId) ?? [];
        queue.push({ reservation, resolve, reject });
        queues.set(reservation.projectId, queue);
        if (!inFlight.has(reservation.projectId)) schedule(reservation.projectId);
      });
    },
  };
}
