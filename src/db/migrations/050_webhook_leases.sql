-- Issue 22: a claim that stays on its page. A claim used to lease a delivery by pushing its
-- next_attempt_at past the attempt's timeout. next_attempt_at is a key of two indexes (the due
-- rows, and the pending rows per endpoint), so every claim wrote a new version of the row with a
-- new entry in each of the table's five indexes that hold pending rows, for every event delivered.
--
-- The lease now has a column of its own that no index holds: a claim changes only leased_until and
-- attempts, and PostgreSQL can keep the new version on the row's page without touching an index
-- (a HOT update) wherever the page has room. A fill factor of 70 leaves a new page that room. A
-- delivery is due when it is pending, its next_attempt_at has come and no lease runs on it
-- (deliveries.ts); what a claim reads stays bounded, as the leased rows it steps over in due order
-- are the ones in flight.
ALTER TABLE webhook_deliveries ADD COLUMN leased_until timestamptz;
ALTER TABLE webhook_deliveries SET (fillfactor = 70);
