/**
 * webhook_deliveries and webhook_attempts: claiming due deliveries across instances, recording
 * each attempt, the delivery log and redelivery.
 *
 * A claim is one statement: `FOR UPDATE SKIP LOCKED` picks due rows no other instance is claiming
 * at that moment, and pushing their next_attempt_at past the attempt's timeout (a lease) keeps
 * them from being claimed again while the HTTP request is in flight, without holding a
 * transaction open across it. An instance that dies mid-attempt (SIGKILL, a lost host) leaves
 * its rows to be claimed again when the lease runs out: at least once, never lost.
 */
import type { Queryable } from "../db/db.ts";
import type { Keyring } from "../secrets/envelope.ts";
import { endpointBinding, openSecret } from "./store.ts";

export interface ClaimedDelivery {
  id: number;
  attempt: number;
  endpointId: number;
  url: string;
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
 * Due rows looked at per claimed row at most. The scan leaves out endpoints and projects already
 * at their cap, so the rows it reads can all be taken but for the ones a single claim would push
 * over a cap; reading a few times the claim's size gives the other projects' rows a place in it.
 */
const SCAN_PER_CLAIM = 8;

/**
 * Claims up to `limit` due deliveries, oldest first, without taking any endpoint or project past
 * its cap counting what `inFlight` says is already running.
 *
 * The caps are this instance's: `inFlight` is the worker's own count, and leases are not told
 * apart from scheduled retries in the table (both are a pending row with next_attempt_at ahead),
 * so another instance's requests are not seen. With N instances a project may have up to
 * N × perProject requests open; caps across instances would need a lease column or table saying
 * who holds which row until when. Each instance still keeps slots for everyone else, which is
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
  const rows = await db.query<{
    id: number;
    attempts: number;
    endpoint_id: number;
    url: string;
    secret: string;
    previous_secret: string | null;
    event_id: string;
    type: string;
    project_id: string;
    payload: unknown;
    created_at: Date;
  }>(
    `WITH busy_endpoint AS (
       SELECT * FROM unnest($3::bigint[], $4::int[]) AS b (endpoint_id, n)),
     busy_project AS (
       SELECT * FROM unnest($5::text[], $6::int[]) AS b (project_id, n)),
     due AS (
       SELECT d.id, d.endpoint_id, e.project_id, d.next_attempt_at,
         COALESCE(be.n, 0) AS endpoint_busy, COALESCE(bp.n, 0) AS project_busy
       FROM webhook_deliveries d
       JOIN webhook_endpoints e ON e.id = d.endpoint_id AND e.enabled
       LEFT JOIN busy_endpoint be ON be.endpoint_id = d.endpoint_id
       LEFT JOIN busy_project bp ON bp.project_id = e.project_id
       WHERE d.status = 'pending' AND d.next_attempt_at <= now()
         AND COALESCE(be.n, 0) < $7 AND COALESCE(bp.n, 0) < $8
       ORDER BY d.next_attempt_at, d.id LIMIT $1 * ${SCAN_PER_CLAIM}),
     within_endpoint AS (
       SELECT * FROM (SELECT due.*,
           row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at, id) AS nth
         FROM due) r
       WHERE endpoint_busy + nth <= $7),
     chosen AS (
       SELECT id FROM (SELECT w.*,
           row_number() OVER (PARTITION BY project_id ORDER BY next_attempt_at, id) AS nth_in_project
         FROM within_endpoint w) r
       WHERE project_busy + nth_in_project <= $8
       ORDER BY next_attempt_at, id LIMIT $1),
     claimed AS (
       SELECT d.id FROM webhook_deliveries d
       WHERE d.id IN (SELECT id FROM chosen) AND d.status = 'pending' AND d.next_attempt_at <= now()
       FOR UPDATE OF d SKIP LOCKED)
     UPDATE webhook_deliveries d SET attempts = d.attempts + 1,
       next_attempt_at = now() + make_interval(secs => $2::double precision / 1000)
     FROM claimed, webhook_endpoints e, event_outbox ev
     WHERE d.id = claimed.id AND e.id = d.endpoint_id AND ev.id = d.event_id
     RETURNING d.id, d.attempts, d.endpoint_id, e.url, e.secret,
       CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END AS previous_secret,
       ev.event_id, ev.type, ev.project_id, ev.payload, ev.created_at`,
    [
      limit,
      leaseMs,
      [...inFlight.byEndpoint.keys()],
      [...inFlight.byEndpoint.values()],
      [...inFlight.byProject.keys()],
      [...inFlight.byProject.values()],
      caps.perEndpoint,
      caps.perProject,
    ],
  );
  return rows.map((r) => ({
    id: r.id,
    attempt: r.attempts,
    endpointId: Number(r.endpoint_id),
    url: r.url,
    ...openedSecrets(ring, Number(r.endpoint_id), r.secret, r.previous_secret),
    eventId: r.event_id,
    type: r.type,
    projectId: r.project_id,
    payload: r.payload,
    createdAt: r.created_at,
  }));
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
 * Records an attempt and moves the delivery on, in one transaction. A delivery that was
 * redelivered or claimed anew meanwhile (its attempt counter moved) keeps its new state; the
 * attempt is logged all the same. Resolves to whether the delivery took the state `r.next` asked for.
 */
export async function recordAttempt(
  db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  delivery: { id: number; attempt: number },
  r: AttemptResult,
): Promise<boolean> {
  const status = r.next.kind === "retry" ? "pending" : r.next.kind;
  const delayMs = r.next.kind === "retry" ? r.next.delayMs : null;
  return db.transaction(async (tx) => {
    const [row] = await tx.query<{ next_at: Date | null }>(
      `UPDATE webhook_deliveries SET status = $3, last_status_code = $4, last_error = $5,
         next_attempt_at = CASE WHEN $6::bigint IS NULL THEN next_attempt_at
           ELSE now() + make_interval(secs => $6::double precision / 1000) END,
         completed_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END
       WHERE id = $1 AND attempts = $2 AND status = 'pending'
       RETURNING CASE WHEN status = 'pending' THEN next_attempt_at END AS next_at`,
      [delivery.id, delivery.attempt, status, r.statusCode, r.error, delayMs],
    );
    await tx.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, latency_ms, status_code, error, next_attempt_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [delivery.id, delivery.attempt, r.startedAt, r.latencyMs, r.statusCode, r.error, row?.next_at ?? null],
    );
    return row !== undefined;
  });
}

/**
 * Deliveries waiting for an attempt (status pending, whether due or scheduled), counted up to
 * `cap`: the partial index webhook_deliveries_due holds exactly these rows, so the read stays
 * bounded however long the backlog grows. For the metrics (services.ts).
 */
export async function countPending(db: Queryable, cap: number): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (
       SELECT 1 FROM webhook_deliveries WHERE status = 'pending' ORDER BY next_attempt_at LIMIT $1) p`,
    [cap],
  );
  return row?.n ?? 0;
}

/** Hands a claim back unattempted (the worker is stopping): due again at once, for any instance. */
export async function releaseClaim(db: Queryable, delivery: { id: number; attempt: number }): Promise<void> {
  await db.query(
    `UPDATE webhook_deliveries SET attempts = attempts - 1, next_attempt_at = now()
     WHERE id = $1 AND attempts = $2 AND status = 'pending'`,
    [delivery.id, delivery.attempt],
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
       CASE WHEN d.status = 'pending' THEN to_char(d.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END AS next_at,
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
 */
export async function redeliver(
  db: Queryable,
  projectId: string,
  endpointId: number,
  deliveryId: number,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE webhook_deliveries d SET status = 'pending', attempts = 0, next_attempt_at = now(), completed_at = NULL
     FROM webhook_endpoints e
     WHERE d.id = $3 AND d.endpoint_id = $2 AND e.id = d.endpoint_id AND e.project_id = $1
     RETURNING d.id`,
    [projectId, endpointId, deliveryId],
  );
  return rows.length > 0;
}
