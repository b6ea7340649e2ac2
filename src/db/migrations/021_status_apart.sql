-- Settlement without new index entries (issue 21): no index of sponsorships mentions its status.
--
-- Settling, releasing or reversing a sponsorship changes its status, and three indexes used it
-- (the pending reservations by chain and by sender, partial on status = 'pending'; the failed ones
-- by project, on status). An UPDATE that changes an indexed column, or one in an index's
-- predicate, cannot be HOT: every settlement wrote a new copy of the row elsewhere and new entries
-- in all of the table's indexes. Those three indexes are replaced by a small table of their own,
-- sponsorship_status_index: one row per sponsorship whose status is not `success` (the pending
-- ones and the failures, a few percent of all), kept by triggers on sponsorships
-- (db/functions/sponsorship_status_index_*.sql) in the statement that changes the status. The
-- columns a settlement writes (status, actual gas and cost, hashes, settled_at) are then in no
-- index of sponsorships, and with room left on each page (fillfactor) the new version of a row
-- can stay on its page with no new index entry.
-- Keyed by status first: pending rows come and go within minutes while failures stay for good,
-- and with the id first every index page would keep a failure or two and never empty, so the key
-- grew with every reservation ever made (measured: 78 MB for 72,000 rows after 3.6 million).
-- Status first, the pending range empties and its pages are reused.
CREATE TABLE sponsorship_status_index (
  sponsorship_id bigint NOT NULL REFERENCES sponsorships (id) ON DELETE CASCADE,
  project_id text NOT NULL,
  chain_id integer NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'reverted', 'expired')),
  sender text NOT NULL,
  paymaster text,
  valid_after bigint NOT NULL,
  valid_until bigint NOT NULL,
  max_gas_cost numeric(78, 0) NOT NULL,
  PRIMARY KEY (status, sponsorship_id)
);
-- Releasing expired reservations, the chain's reserved sum and its earliest one (was sponsorships_pending).
CREATE INDEX sponsorship_status_pending ON sponsorship_status_index (chain_id, valid_until) WHERE status = 'pending';
-- A sender's pending operations (was sponsorships_pending_by_sender).
CREATE INDEX sponsorship_status_pending_by_sender ON sponsorship_status_index (project_id, sender)
  WHERE status = 'pending';
-- Events filtered by a status other than success (was sponsorships_by_status).
CREATE INDEX sponsorship_status_by_project ON sponsorship_status_index (project_id, status, sponsorship_id DESC);

INSERT INTO sponsorship_status_index (sponsorship_id, project_id, chain_id, status, sender, paymaster,
    valid_after, valid_until, max_gas_cost)
  SELECT id, project_id, chain_id, status, sender, paymaster, valid_after, valid_until, max_gas_cost
  FROM sponsorships WHERE status <> 'success';

DROP INDEX sponsorships_pending;
DROP INDEX sponsorships_pending_by_sender;
DROP INDEX sponsorships_by_status;

-- Room on each page for a settled version of its rows (a settlement adds the transaction and
-- operation hashes, about 150 bytes to a row of about 400): applies to pages written from now on.
ALTER TABLE sponsorships SET (fillfactor = 80);
