/**
 * webhook_deliveries and webhook_attempts: claiming due deliveries across instances, recording
 * each attempt, the delivery log and redelivery.
 *
 * A claim is one statement: `FOR UPDATE SKIP LOCKED` picks due rows no other instance is claiming
 * at that moment, and setting their leased_until past the attempt's timeout (a lease) keeps them
 * from being claimed again while the HTTP request is in flight, without holding a transaction
 * open across it. An instance that dies mid-attempt (SIGKILL, a lost host) leaves its rows to be
 * claimed again when the lease runs out: at least once, never lost. No index holds leased_until,
 * the attempt counter or claim_seq, the columns a claim changes, so a claim can stay on the row's
 * page without new index entries (migration 050); the lease used to be next_attempt_at, pushed
 * ahead. claim_seq fences what a claim may do afterwards (migration 051): its record and its
 * release apply only while no later claim or redelivery has moved it on.
 */
import type { Queryable } from "../db/db.ts";
import type { Keyring } from "../secrets/envelope.ts";
import { endpointBinding, openSecret } from "./store.ts";

export interface ClaimedDelivery {
  id: number;
  attempt: number;
  /**
   * The claim's fence: the row's claim_seq as this claim set it (migration 051). Its record and
   * its release apply only while the row still carries it; a later claim or a redelivery moves it.
   */
  claim: number;
  endpointId: number;
  url: string;
  /** The endpoint's events per request at most (migration 053): 1, or a batch of up to this many. */
  perRequest: number;
  /** The current secret, then the previous one while it is still honoured (opened). */
  secrets: string[];
  /**
   * Why the endpoint's current secret could not be opened (a key missing from the configuration,
   * a value altered or copied from another row), or null. Such a delivery is not sent: an
   * unsigned or wrongly signed request would teach receivers to skip verification.
   */
  secretProblem: string | null;
  eventId: string;
  type: string;
  projectId: string;
  payload: unknown;
  createdAt: Date;
}

/** How many deliveries may be in flight at once for one endpoint and for one project. */
export interface InFlightCaps {
  perEndpoint: number;
  perProject: number;
}

/** What the claiming instance has in flight now, per endpoint and per project (absent: none). */
export interface InFlight {
  byEndpoint: ReadonlyMap<number, number>;
  byProject: ReadonlyMap<string, number>;
}

/**
 * The oldest due rows a claim looks at first, per row it may claim: reading a few times the
 * claim's size leaves room for the rows a cap sets aside and still gives other projects' rows a
 * place in it.
 */
const SCAN_PER_CLAIM = 8;

/**
 * The window is sized for a claim of at most this many rows, whatever the claim asks: past it the
 * window only grew the read (a claim of 100 read 800 due rows, about 3 ms a claim and 230 µs of
 * PostgreSQL per delivered event under the bench, where one endpoint's backlog filled every row
 * of it). A full window sends the claim to the endpoints themselves anyway (below), so what a
 * bigger claim takes does not depend on the window's size.
 */
const WINDOW_CLAIM_ROWS = 16;

/**
 * Claims up to `limit` due deliveries, oldest first, without taking any endpoint or project past
 * its cap counting what `inFlight` says is already running.
 *
 * Most claims find what they can take among the oldest due rows: a window of
 * `min(limit, WINDOW_CLAIM_ROWS) × SCAN_PER_CLAIM` of them, read in due order from webhook_deliveries_due
 * (db/functions/webhook_claim_window.sql, which keeps that plan without statistics). A full window
 * may hide other endpoints' due rows behind one endpoint's backlog (an endpoint at its cap, or a
 * receiver slower than its events arrive); then the claim also visits each endpoint that has
 * pending deliveries, one descent of webhook_deliveries_pending_by_endpoint each (a loose index
 * scan), for the oldest due rows its cap leaves room for. Either way what a claim reads is
 * bounded: the window, plus two index descents per endpoint with pending deliveries when the
 * window is full, never the backlog itself. (Reading in due order alone read a busy endpoint's
 * whole backlog on every claim, to take nothing from it; visiting every endpoint alone cost
 * every claim a descent per endpoint with a retry scheduled for later, however few were due.)
 *
 * The caps are this instance's: `inFlight` is the worker's own count. The table tells a leased
 * row (leased_until ahead) from a scheduled retry, but not which instance holds it, so another
 * instance's requests are not counted. With N instances a project may have up to N × perProject
 * requests open; caps across instances would need the lease to say who holds the row. Each instance still keeps slots for everyone else, which is
 * what stops one tenant from stalling another.
 *
 * Row locks cannot be taken in a query with window functions, so the choice is made first from a
 * plain read, then the chosen rows are locked with SKIP LOCKED and checked again (still pending,
 * still due): a row another instance claimed meanwhile is skipped, or fails the check on its new
 * version, exactly as with a single locking SELECT.
 */
export async function claimDue(
  db: Queryable,
  limit: number,
  leaseMs: number,
  caps: InFlightCaps,
  inFlight: InFlight,
  ring: Keyring,
): Promise<ClaimedDelivery[]> {
  if (limit <= 0) return [];
  const claim = claimStatement(limit, leaseMs, caps, inFlight);
  const rows = await db.query<{
    id: number;
    attempts: number;
    claim_seq: number;
    endpoint_id: number;
    url: string;
    max_events_per_request: number;
    secret: string;
    previous_secret: string | null;
    event_id: string;
    type: string;
    project_id: string;
    payload: unknown;
    created_at: Date;
  }>(claim.text, claim.values, "webhook-claim");
  return rows.map((r) => ({
    id: r.id,
    attempt: r.attempts,
    claim: r.claim_seq,
    endpointId: Number(r.endpoint_id),
    url: r.url,
    perRequest: r.max_events_per_request,
    ...openedSecrets(ring, Number(r.endpoint_id), r.secret, r.previous_secret),
    eventId: r.event_id,
    type: r.type,
    projectId: r.project_id,
    payload: r.payload,
    createdAt: r.created_at,
  }));
}

/**
 * The claim's statement and parameters (claimDue runs it; tests read what it reads). The claim is
 * a function of the database's (db/functions/webhook_claim.sql), which keeps its plan per
 * connection under settings that keep that plan on the indexes.
 */
export function claimStatement(
  limit: number,
  leaseMs: number,
  caps: InFlightCaps,
  inFlight: InFlight,
): { text: string; values: unknown[] } {
  return {
    text: "SELECT * FROM webhook_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    values: [
      limit,
      leaseMs,
      [...inFlight.byEndpoint.keys()],
      [...inFlight.byEndpoint.values()],
      [...inFlight.byProject.keys()],
      [...inFlight.byProject.values()],
      caps.perEndpoint,
      caps.perProject,
      Math.min(limit, WINDOW_CLAIM_ROWS) * SCAN_PER_CLAIM,
    ],
  };
}

/**
 * The endpoint's secrets, opened. A previous secret that does not open is left out (the current
 * one still signs); a current one that does not open is a problem the worker records.
 */
function openedSecrets(
  ring: Keyring,
  endpointId: number,
  current: string,
  previous: string | null,
): Pick<ClaimedDelivery, "secrets" | "secretProblem"> {
  const binding = endpointBinding(endpointId);
  const opened = openSecret(ring, current, binding);
  if (!opened.ok) return { secrets: [], secretProblem: opened.why };
  const older = previous === null ? null : openSecret(ring, previous, binding);
  return { secrets: older?.ok ? [opened.secret, older.secret] : [opened.secret], secretProblem: null };
}

export interface AttemptResult {
  startedAt: Date;
  latencyMs: number;
  statusCode: number | null;
  error: string | null;
  /** succeeded; retry after delayMs; or failed for good. */
  next: { kind: "succeeded" } | { kind: "retry"; delayMs: number } | { kind: "failed" };
}

/**
 * Records attempts and moves their deliveries on, in one statement (atomic without a transaction
 * of its own). A delivery that was redelivered or claimed anew meanwhile (its claim_seq moved on
 * from the claim's) keeps its new state and its new holder's lease; its attempt is logged all the
 * same. Answers, for each item in order, whether its delivery took the state `result.next` asked
 * for. The worker records through a batcher (worker.ts): attempts that end while one record is on
 * its way go together in the next, one commit for all of them instead of one per delivered event.
 */
export async function recordAttempts(
  db: Queryable,
  items: { delivery: Pick<ClaimedDelivery, "id" | "attempt" | "claim">; result: AttemptResult }[],
): Promise<boolean[]> {
  const column = <T>(f: (item: (typeof items)[number]) => T) => items.map(f);
  const rows = await db.query<{ moved: boolean }>(
    "SELECT moved FROM webhook_record_attempts($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    [
      column((x) => x.delivery.id),
      column((x) => x.delivery.attempt),
      column((x) => (x.result.next.kind === "retry" ? "pending" : x.result.next.kind)),
      column((x) => x.result.statusCode),
      column((x) => x.result.error),
      column((x) => (x.result.next.kind === "retry" ? x.result.next.delayMs : null)),
      column((x) => x.result.startedAt),
      column((x) => x.result.latencyMs),
      column((x) => x.delivery.claim),
    ],
    "webhook-record-attempts",
  );
  return rows.map((r) => r.moved);
}

/**
 * Deliveries waiting for an attempt (status pending, whether due or scheduled), counted up to
 * `cap`: the partial index webhook_deliveries_due holds exactly these rows, so the
 * read stays bounded however long the backlog grows. For the metrics (services.ts).
 */
export async function countPending(db: Queryable, cap: number): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (
       SELECT 1 FROM webhook_deliveries WHERE status = 'pending' LIMIT $1) p`,
    [cap],
  );
  return row?.n ?? 0;
}

/**
 * Hands claims back unattempted (the worker is stopping, or they waited too long to be sent): each
 * due again at once, for any instance, in its place in due order, unless a later claim or a
 * redelivery moved it on meanwhile (its claim_seq). One statement for all: a stopping worker hands
 * back everything it holds, up to eight deliveries per slot, at once.
 */
export async function releaseClaims(
  db: Queryable,
  deliveries: readonly Pick<ClaimedDelivery, "id" | "claim">[],
): Promise<void> {
  if (deliveries.length === 0) return;
  await db.query(
    `UPDATE webhook_deliveries d SET attempts = d.attempts - 1, leased_until = NULL
     FROM unnest($1::bigint[], $2::int[]) AS r (id, claim)
     WHERE d.id = r.id AND d.claim_seq = r.claim AND d.status = 'pending'`,
    [deliveries.map((d) => d.id), deliveries.map((d) => d.claim)],
    "webhook-release-claims",
  );
}

export interface DeliveryView {
  id: number;
  event_id: string;
  event_type: string;
  status: string;
  attempts: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  completed_at: string | null;
  log: {
    attempt: number;
    started_at: string;
    latency_ms: number;
    status_code: number | null;
    error: string | null;
    next_attempt_at: string | null;
  }[];
}

/** Attempts shown per delivery in the log: the most recent ones. */
export const LOG_ATTEMPTS_SHOWN = 50;

/** An endpoint's deliveries, newest first, each with its latest attempts; `beforeId` pages. */
export async function listDeliveries(
  db: Queryable,
  endpointId: number,
  q: { limit: number; beforeId: number | null; status: string | null },
): Promise<DeliveryView[]> {
  const rows = await db.query<
    Omit<DeliveryView, "log" | "next_attempt_at"> & {
      next_at: string | null;
      log: DeliveryView["log"] | null;
    }
  >(
    `SELECT d.id, ev.event_id, ev.type AS event_type, d.status, d.attempts,
       CASE WHEN d.status = 'pending' THEN to_char(GREATEST(d.next_attempt_at, d.leased_until) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS next_at,
       d.last_status_code, d.last_error,
       to_char(d.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at,
       to_char(d.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS completed_at,
       (SELECT jsonb_agg(jsonb_build_object('attempt', a.attempt,
            'started_at', to_char(a.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'latency_ms', a.latency_ms, 'status_code', a.status_code, 'error', a.error,
            'next_attempt_at', to_char(a.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
          ORDER BY a.id)
        FROM (SELECT * FROM webhook_attempts WHERE delivery_id = d.id ORDER BY id DESC LIMIT ${LOG_ATTEMPTS_SHOWN}) a) AS log
     FROM webhook_deliveries d JOIN event_outbox ev ON ev.id = d.event_id
     WHERE d.endpoint_id = $1 AND ($2::bigint IS NULL OR d.id < $2) AND ($3::text IS NULL OR d.status = $3)
     ORDER BY d.id DESC LIMIT $4`,
    [endpointId, q.beforeId, q.status, q.limit],
  );
  return rows.map(({ next_at, log, ...r }) => ({ ...r, next_attempt_at: next_at, log: log ?? [] }));
}

/**
 * Puts a delivery back in the queue at once with a fresh schedule of attempts (the log keeps the
 * earlier ones). The receiver gets the same event id, so it can tell a redelivery from a new event.
 * An attempt in flight meanwhile is not waited for: the delivery may be sent again before it ends
 * (asked for at once, at least once), and that attempt's result is logged but no longer moves the
 * delivery, whose claim_seq the redelivery moved on.
 */
export async function redeliver(
  db: Queryable,
  projectId: string,
  endpointId: number,
  deliveryId: number,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(), leased_until = NULL,
       completed_at = NULL, claim_seq = d.claim_seq + 1
     FROM webhook_endpoints e
     WHERE d.id = $3 AND d.endpoint_id = $2 AND e.id = d.endpoint_id AND e.project_id = $1
     RETURNING d.id`,
    [projectId, endpointId, deliveryId],
  );
  return rows.length > 0;
}
