-- Webhook retention (src/retention/webhooks.ts): the upkeep job removes finished deliveries and
-- old outbox events once WEBHOOK_RETENTION_DAYS have passed. These two indexes give its work
-- lists a start and an end, so a pass reads only rows past the retention period instead of the
-- whole of either table.

-- Finished deliveries by the time they finished. Pending rows (status 'pending', completed_at
-- NULL) are left out: they are never removed, and they already have webhook_deliveries_due.
-- A range on this index up to the cutoff holds only rows the job may delete.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (completed_at) WHERE status <> 'pending';

-- Events by age, with the id as a tiebreak: every event written in one transaction shares its
-- created_at (now() is the transaction's start), so the job resumes a walk after a
-- (created_at, id) pair. Events still referenced by a delivery are walked past, not removed.
CREATE INDEX event_outbox_created ON event_outbox (created_at, id);
