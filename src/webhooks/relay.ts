/**
 * The relay of sponsorship.sponsored events (migration 055, db/functions/relay_sponsored_events.sql):
 * the events of sponsorships made since the last pass, written after the reservations committed,
 * in a transaction of their own. Every instance's webhook worker runs it (worker.ts): soon after
 * its own reservations (a kick), and at each poll for the rest.
 */
import type { Queryable } from "../db/db.ts";

/** Sponsorships per project in one pass; a pass that reaches it is followed by another at once. */
export const RELAY_LIMIT = 1_000;

/**
 * One pass over the subscribed projects with sponsorships the relay has not passed yet. Answers
 * how many sponsorships it passed (their events written, or skipped for a project nobody
 * subscribes to any more); RELAY_LIMIT or more means some may still wait.
 */
export async function relaySponsoredEvents(db: Queryable, limit = RELAY_LIMIT): Promise<number> {
  const [row] = await db.query<{ passed: string }>(
    "SELECT relay_sponsored_events($1)::text AS passed",
    [limit],
    "webhook-relay-sponsored",
  );
  return Number(row?.passed ?? 0);
}

/**
 * Sponsorships the relay has not passed yet, over every project with a cursor (the
 * gss_sponsored_events_behind gauge): near zero while it keeps up, growing if it stalls.
 */
export async function relayBacklog(db: Queryable): Promise<number> {
  const [row] = await db.query<{ behind: string }>(
    `SELECT coalesce(sum(p.sponsorships_seq - k.last_seq), 0)::text AS behind
     FROM sponsored_event_cursors k JOIN projects p ON p.id = k.project_id
     WHERE p.sponsorships_seq > k.last_seq`,
  );
  return Number(row?.behind ?? 0);
}
