-- Records webhook attempts and moves their deliveries on, in one statement (src/webhooks/deliveries.ts,
-- recordAttempts, says what each column means). A delivery moves only while its claim_seq is still
-- the claim's (migration 051) and it is pending; every attempt is logged either way, unless its
-- delivery is gone (migration 057). Answers, for each item in order, whether its delivery moved.
--
-- A function for its plan, as webhook_claim.sql explains: planned at every call as a statement
-- from the service (14 µs of PostgreSQL per authorization under `npm run bench` with events). As a
-- named statement, the plan it kept from a small table walked webhook_deliveries_due to find its
-- rows (12 ms a record at 100 rows; 3,000 rows read for 4 attempts in
-- test/webhooks-claim-plan.test.ts); kept under the settings below, it looks each row up by its
-- primary key.
CREATE OR REPLACE FUNCTION webhook_record_attempts(
  p_ids bigint[], p_attempts integer[], p_statuses text[], p_status_codes integer[], p_errors text[],
  p_delays_ms bigint[], p_started_at timestamptz[], p_latencies_ms integer[], p_claims integer[])
RETURNS TABLE (moved boolean)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
     SELECT * FROM unnest(p_ids, p_attempts, p_statuses, p_status_codes, p_errors, p_delays_ms,
         p_started_at, p_latencies_ms, p_claims)
       WITH ORDINALITY AS i (id, attempt, status, status_code, error, delay_ms, started_at, latency_ms, claim, ord)),
   moved_rows AS (
     UPDATE webhook_deliveries d SET status = i.status, last_status_code = i.status_code,
       last_error = i.error, leased_until = NULL,
       next_attempt_at = CASE WHEN i.delay_ms IS NULL THEN d.next_attempt_at
         ELSE now() + make_interval(secs => i.delay_ms::double precision / 1000) END,
       completed_at = CASE WHEN i.status = 'pending' THEN NULL ELSE now() END
     FROM input i
     WHERE d.id = i.id AND d.claim_seq = i.claim AND d.status = 'pending'
     RETURNING d.id, CASE WHEN d.status = 'pending' THEN d.next_attempt_at END AS next_at),
   logged AS (
     INSERT INTO webhook_attempts (delivery_id, attempt, started_at, latency_ms, status_code, error, next_attempt_at)
     SELECT i.id, i.attempt, i.started_at, i.latency_ms, i.status_code, i.error, m.next_at
       FROM input i LEFT JOIN moved_rows m ON m.id = i.id
       -- A delivery deleted since its claim (its endpoint was) has no log to add to (migration 057).
       WHERE EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = i.id)
       ORDER BY i.ord)
  SELECT m.id IS NOT NULL FROM input i LEFT JOIN moved_rows m ON m.id = i.id ORDER BY i.ord;
END $$;
