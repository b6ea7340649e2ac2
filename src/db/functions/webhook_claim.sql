-- Claims up to p_limit due webhook deliveries (src/webhooks/deliveries.ts, claimDue, says what the
-- claim reads and why): leases them for p_lease_ms and answers each with its endpoint and event.
--
-- A function for its plan (issue 22). As a statement sent from the service it was planned at every
-- call, about 0.9 ms a claim: a named statement let the server keep the one plan it made while the
-- deliveries table was small, whose final UPDATE read the whole table once it had grown (43 ms a
-- claim at 32,000 rows, on a server without autovacuum). PL/pgSQL keeps its statement's plan per
-- connection too, and the settings below are in force when it is made: with sequential and bitmap
-- scans priced out, every plan it can keep reads webhook_deliveries through an index, whatever the
-- table's size or statistics were at that moment. The planning time went away with it (measured
-- under `npm run bench`, events subscribed: 32 µs of PostgreSQL per authorization).
CREATE OR REPLACE FUNCTION webhook_claim(
  p_limit integer, p_lease_ms double precision,
  p_busy_endpoints bigint[], p_busy_endpoint_counts integer[],
  p_busy_projects text[], p_busy_project_counts integer[],
  p_per_endpoint integer, p_per_project integer, p_window integer)
RETURNS TABLE (id bigint, attempts integer, claim_seq integer, endpoint_id bigint, url text,
  max_events_per_request integer, secret text, previous_secret text, event_id text, type text,
  project_id text, payload jsonb, created_at timestamptz)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH RECURSIVE busy_endpoint AS (
     SELECT * FROM unnest(p_busy_endpoints, p_busy_endpoint_counts) AS b (endpoint_id, n)),
   busy_project AS (
     SELECT * FROM unnest(p_busy_projects, p_busy_project_counts) AS b (project_id, n)),
   oldest AS MATERIALIZED (
     SELECT * FROM webhook_claim_window(p_window)),
   crowded AS (
     SELECT count(*) = p_window AS yes FROM oldest),
   -- The window is full: every endpoint with pending deliveries, one index descent each.
   waiting AS (
     (SELECT d.endpoint_id FROM webhook_deliveries d WHERE d.status = 'pending' AND (SELECT yes FROM crowded)
      ORDER BY d.endpoint_id LIMIT 1)
     UNION ALL
     SELECT (SELECT d.endpoint_id FROM webhook_deliveries d
             WHERE d.status = 'pending' AND d.endpoint_id > w.endpoint_id ORDER BY d.endpoint_id LIMIT 1)
     FROM waiting w WHERE w.endpoint_id IS NOT NULL),
   beyond AS (
     SELECT h.id, w.endpoint_id, h.next_attempt_at
     FROM waiting w
     LEFT JOIN busy_endpoint be ON be.endpoint_id = w.endpoint_id
     CROSS JOIN LATERAL (
       SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
       WHERE d.endpoint_id = w.endpoint_id
         AND d.status = 'pending' AND d.next_attempt_at <= now() AND (d.leased_until IS NULL OR d.leased_until <= now())
       ORDER BY d.next_attempt_at, d.id
       LIMIT GREATEST(p_per_endpoint - COALESCE(be.n, 0), 0)) h),
   due AS (
     SELECT c.id, c.next_attempt_at, c.endpoint_id, e.project_id,
       COALESCE(be.n, 0) AS endpoint_busy, COALESCE(bp.n, 0) AS project_busy
     FROM (SELECT * FROM oldest UNION SELECT * FROM beyond) c
     JOIN webhook_endpoints e ON e.id = c.endpoint_id AND e.enabled
     LEFT JOIN busy_endpoint be ON be.endpoint_id = c.endpoint_id
     LEFT JOIN busy_project bp ON bp.project_id = e.project_id
     WHERE COALESCE(be.n, 0) < p_per_endpoint AND COALESCE(bp.n, 0) < p_per_project),
   within_endpoint AS (
     SELECT * FROM (SELECT due.*,
         row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at, due.id) AS nth
       FROM due) r
     WHERE r.endpoint_busy + r.nth <= p_per_endpoint),
   chosen AS (
     SELECT r.id FROM (SELECT w.*,
         row_number() OVER (PARTITION BY w.project_id ORDER BY w.next_attempt_at, w.id) AS nth_in_project
       FROM within_endpoint w) r
     WHERE r.project_busy + r.nth_in_project <= p_per_project
     ORDER BY r.next_attempt_at, r.id LIMIT p_limit),
   -- Row locks cannot be taken where window functions are: the chosen rows are locked here, those
   -- another instance is claiming skipped, and each checked again on its current version.
   claimed AS (
     SELECT l.id FROM chosen c CROSS JOIN LATERAL (
       SELECT d.id FROM webhook_deliveries d
       WHERE d.id = c.id
         AND d.status = 'pending' AND d.next_attempt_at <= now() AND (d.leased_until IS NULL OR d.leased_until <= now())
       FOR UPDATE OF d SKIP LOCKED) l)
  UPDATE webhook_deliveries d SET attempts = d.attempts + 1, claim_seq = d.claim_seq + 1,
    leased_until = now() + make_interval(secs => p_lease_ms / 1000)
  FROM webhook_endpoints e, event_outbox ev
  WHERE d.id = ANY (ARRAY(SELECT c.id FROM claimed c)) AND e.id = d.endpoint_id AND ev.id = d.event_id
  RETURNING d.id, d.attempts, d.claim_seq, d.endpoint_id, e.url, e.max_events_per_request, e.secret,
    CASE WHEN e.previous_secret_until > now() THEN e.previous_secret END,
    ev.event_id, ev.type, ev.project_id, ev.payload, ev.created_at;
END $$;
