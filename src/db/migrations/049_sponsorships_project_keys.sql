-- Issue 21: bytes per operation. sponsorships' two indexes by project, (project_id, id) for the
-- events pages by id and by time, and (project_id, seq) for the pages by offset, held the
-- project's text in every entry: 50 bytes per operation each at 100,000 operations with a
-- 20-character project id. Each is now the project's 64-bit key (db/bytes.ts projectKey, as
-- ledger_entries' since migration 048), then the id or the sequence number: two bigints. A read
-- compares the project itself too (analytics/store.ts).
--
-- (project_id, seq) was UNIQUE. A unique key on (project key, seq) would refuse a reservation of
-- a project whose key another project shares, at every sequence number they both reach; without
-- the uniqueness, the sequence stays what makes it unique: reserve_sponsorships.sql hands out the
-- numbers from projects.sponsorships_seq under the project's row lock, and so does the trigger
-- for rows written without one (sponsorships_assign_seq.sql).
CREATE INDEX sponsorships_by_project_key ON sponsorships
  ((('x' || left(md5(project_id), 16))::bit(64)::bigint), id);
DROP INDEX sponsorships_by_project;

CREATE INDEX sponsorships_by_project_key_seq ON sponsorships
  ((('x' || left(md5(project_id), 16))::bit(64)::bigint), seq);
DROP INDEX sponsorships_project_seq;
