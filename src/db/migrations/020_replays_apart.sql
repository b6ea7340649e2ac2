-- Idempotent replays move out of sponsorships into a table of their own (issue 21).
--
-- A reservation with a client nonce kept its nonce, request digest and stored response on its
-- sponsorship row, and the retention job cleared them after 24 hours: an UPDATE of every such
-- row, which could never stay HOT (the nonce is in a unique index, all three in the job's partial
-- index), so each left a dead copy of the row and new entries in every index of the table's nine.
-- The replays now live in sponsorship_replays, inserted with the reservation and deleted by the
-- retention job: sponsorships is no longer written after 24 hours, and the freed space of the
-- replay table is reused by the next day's replays. The nonce's lookup has one index to use, its
-- primary key (with the nonce in a two-column unique index beside the project's other indexes, a
-- stale plan could pick the project's whole history instead).
CREATE TABLE sponsorship_replays (
  project_id text NOT NULL REFERENCES projects (id),
  client_nonce text NOT NULL,
  -- The sponsorship the nonce's request created.
  auth_id text NOT NULL,
  request_digest text,
  response text,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (project_id, client_nonce)
);
-- The retention job's work list, oldest first.
CREATE INDEX sponsorship_replays_by_age ON sponsorship_replays (created_at);

INSERT INTO sponsorship_replays (project_id, client_nonce, auth_id, request_digest, response, created_at)
  SELECT project_id, client_nonce, auth_id, request_digest, response, created_at FROM sponsorships
  WHERE client_nonce IS NOT NULL;

DROP INDEX sponsorships_replay_kept;
ALTER TABLE sponsorships DROP COLUMN client_nonce, DROP COLUMN request_digest, DROP COLUMN response;
