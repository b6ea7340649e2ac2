-- Issue 22: the three foreign keys an authorization pays for, checked once per statement instead
-- of once per row.
--
-- Each authorization inserts a sponsorship (keys to projects and api_keys) and a ledger entry (a
-- key to projects): three row-level checks, each an AFTER trigger event queued for the row and run
-- as a query of its own that takes a KEY SHARE lock on the parent's row. Counted by callgrind
-- (`npm run bench:instructions`: PostgreSQL 15 in single-user mode, reservations of 25), they were
-- 88,900 of the 755,500 instructions PostgreSQL spends per authorization, 12 %, for nothing the
-- reservation does not know already: it has just read and locked the project's row, and the key's
-- id comes from the request it authenticated (bench/results-2026-12-02-references.txt).
--
-- The guarantee stays, checked per statement (db/functions/sponsorships_check_references.sql,
-- ledger_entries_check_references.sql): after each INSERT, one query looks up the distinct
-- projects and keys of all its rows, and a row that names a missing one, or a key of another
-- project, fails the whole statement with foreign_key_violation (23503), as the key did. A batch
-- of 25 then costs 674,998 instructions per authorization against 753,571 (-10.4 %); a batch of
-- one costs the same as before (4.13 against 4.15 million).
--
-- What the keys' parent side did (refusing to delete a referenced project or key, or to change its
-- id) is kept by refusing both outright (db/functions/refuse_referenced_change.sql): no statement
-- of the service deletes a project or an API key (keys are revoked, projects are never deleted, as
-- migration 042 already relied on), so nothing is deleted under a reservation that has just checked
-- it, and the check needs no lock. A sponsorship's project and key do not change either
-- (sponsorships_keep_owner.sql). TRUNCATE passes row triggers by, as ever: it is an operator's
-- tool, and the tests' store reset truncates every table at once.
ALTER TABLE sponsorships DROP CONSTRAINT IF EXISTS sponsorships_project_id_fkey;
ALTER TABLE sponsorships DROP CONSTRAINT IF EXISTS sponsorships_api_key_id_fkey;
ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ledger_entries_project_id_fkey;
