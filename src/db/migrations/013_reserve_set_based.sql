-- The reservation writes a batch's grants in one INSERT per table instead of one per item, so the
-- statement-level triggers on sponsorships (rollups in 012, the sponsored event in 009) run once
-- per batch, not once per reservation. A nonce used twice in one batch is a replay of its first
-- use, as before (the first one's row used to be visible to the second by then). An expired
-- nonce is forgotten only when it is met, instead of an UPDATE statement per nonce.
--
-- A per-project sequence number on sponsorships, so that the events' `offset` is an index seek
-- instead of a walk over the ids it skips (130 ms at offset 1,000,000 before): the page at offset
-- k of a project with N events is the rows with seq <= N - k, newest first. The reservation
-- assigns seq under the project's row lock (projects.sponsorships_seq is the last one given),
-- so a project's seqs are gapless and follow its ids. Any other writer of sponsorships (tests,
-- the scale bench's bulk seeding) gets one from a row trigger when it does not give one.
ALTER TABLE projects ADD COLUMN sponsorships_seq bigint NOT NULL DEFAULT 0 CHECK (sponsorships_seq >= 0);
ALTER TABLE sponsorships ADD COLUMN seq bigint CHECK (seq > 0);

UPDATE sponsorships s SET seq = n.seq
  FROM (SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY id) AS seq FROM sponsorships) n
  WHERE n.id = s.id;
UPDATE projects p SET sponsorships_seq = COALESCE((SELECT max(seq) FROM sponsorships WHERE project_id = p.id), 0);
ALTER TABLE sponsorships ALTER COLUMN seq SET NOT NULL;
CREATE UNIQUE INDEX sponsorships_project_seq ON sponsorships (project_id, seq);
