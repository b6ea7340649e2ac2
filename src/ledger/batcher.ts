import { batchPerKey } from "../batching.ts";
import type { Queryable } from "../db/db.ts";
import { type Reservation, type ReserveOutcome, reserveMany } from "./ledger.ts";

/**
 * Groups concurrent reservations of the same project on the same chain into one database call. Every reservation
 * of a project serialises on the project's row until its transaction commits (and its commit
 * record is flushed), so one call per request caps a busy project at one commit per flush. Here a
 * project has at most one call in flight; whatever arrives meanwhile goes in the next call.
 */
export interface ReservationBatcher {
  reserve(r: Reservation): Promise<ReserveOutcome>;
}

/**
 * `observeBatch` learns each batch's size (the reservation batch metric); `reserved` is told after
 * each batch's call has come back (the webhook worker relays sponsorship.sponsored events then).
 */
export function reservationBatcher(
  db: Queryable,
  observeBatch?: (size: number) => void,
  reserved?: () => void,
): ReservationBatcher {
  // One batch per project and chain: a chain's reservations are decided on that chain's tank.
  const send = batchPerKey(async (_key: string, items: Reservation[]) => {
    observeBatch?.(items.length);
    const outcomes = await reserveMany(db, items[0]!.projectId, items);
    reserved?.();
    return outcomes;
  });
  return { reserve: (r) => send(`${r.chainId}:${r.projectId}`, r) };
}
