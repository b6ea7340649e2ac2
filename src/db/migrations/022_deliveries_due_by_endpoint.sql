-- Claiming webhook deliveries in time that does not grow with the backlog (issue 22).
--
-- The claim looked for due deliveries in next_attempt_at order (webhook_deliveries_due) and left
-- out those of endpoints already at their in-flight cap. When the oldest due rows were one busy
-- endpoint's, every claim read all of them to find none: measured at 11 ms a claim with 9,000
-- deliveries waiting for one endpoint, a claim for every delivery made, the backlog growing by
-- a thousand a second under `npm run bench` with events subscribed. A claim still looks at the
-- oldest due rows first (a bounded window of webhook_deliveries_due); when that window is full,
-- it also visits each endpoint that has pending deliveries through this index (one descent
-- each) for the oldest due rows its cap leaves room for (src/webhooks/deliveries.ts).
--
-- The window is read in (next_attempt_at, id) order, which the old index on next_attempt_at alone
-- left to a sort: deliveries fanned out in one statement share their next_attempt_at, and a sort
-- over ties reads all of them. The id joins the key.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_pending_by_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at, id)
  WHERE status = 'pending';
