-- Claiming webhook deliveries in time that does not grow with the backlog (issue 22).
--
-- The claim looked for due deliveries in next_attempt_at order (webhook_deliveries_due) and left
-- out those of endpoints already at their in-flight cap. When the oldest due rows were one busy
-- endpoint's, every claim read all of them to find none: measured at 11 ms a claim with 9,000
-- deliveries waiting for one endpoint, a claim for every delivery made, the backlog growing by
-- a thousand a second under `npm run bench` with events subscribed. Claims now visit each
-- endpoint that has pending deliveries (one descent of this index each) and take from it only as
-- many of its oldest due rows as its cap leaves room for.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_pending_by_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at, id)
  WHERE status = 'pending';
