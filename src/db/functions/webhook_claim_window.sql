-- The oldest due webhook deliveries, at most p_limit, read in (next_attempt_at, id) order straight
-- from webhook_deliveries_due: the first part of a claim (webhook_claim.sql). A leased
-- row (in flight, migration 050) is still in that index; it is stepped over here. The claim's
-- other reads use the same condition (webhook_claim.sql).
--
-- The planner settings are the point of this function. A store whose statistics are stale or
-- were never gathered (PGlite has no autovacuum; the test server runs without it) estimates a
-- handful of pending rows and picks a bitmap scan of all of them and a sort, which reads a
-- backlog of any size to return p_limit rows: 2,001 rows read for 128 in the test of it. With
-- bitmap scans, sequential scans and sorts priced out for this one query, the ordered index scan
-- is the plan whatever the statistics say, and it stops after p_limit rows.
CREATE OR REPLACE FUNCTION webhook_claim_window(p_limit bigint)
RETURNS TABLE (id bigint, endpoint_id bigint, next_attempt_at timestamptz)
LANGUAGE sql STABLE
SET enable_bitmapscan = off SET enable_seqscan = off SET enable_sort = off
AS $$
  SELECT d.id, d.endpoint_id, d.next_attempt_at FROM webhook_deliveries d
  WHERE d.status = 'pending' AND d.next_attempt_at <= now()
    AND (d.leased_until IS NULL OR d.leased_until <= now())
  ORDER BY d.next_attempt_at, d.id
  LIMIT p_limit;
$$;
