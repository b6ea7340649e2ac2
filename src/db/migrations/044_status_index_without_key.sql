-- Issue 22: sponsorship_status_index (migration 021) is written only by the triggers on
-- sponsorships, from the rows they insert and update, so its foreign key to sponsorships checked
-- at every reservation what its own writer guarantees: a lookup of the sponsorship per pending
-- row, a quarter of the reservation's foreign-key checks. The key's other use, ON DELETE CASCADE,
-- is now a statement-level trigger (db/functions/sponsorship_status_index_delete.sql).
ALTER TABLE sponsorship_status_index DROP CONSTRAINT sponsorship_status_index_sponsorship_id_fkey;
