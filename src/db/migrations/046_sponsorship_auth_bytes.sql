-- Issue 21: bytes per operation. A sponsorship's authorization id as its 32 bytes instead of 66
-- characters of text: 34 bytes less in every row, as migration 031 did for its hashes. Its unique
-- index was already on the bytes (migration 030) and is now on the column itself. The table is
-- rewritten once. Writers convert the 0x-prefixed id (reserve_sponsorships.sql); readers give it
-- back as 0x-prefixed hexadecimal (db/bytes.ts hex: analytics, the settlement watcher, the event
-- triggers), and lookups compare bytes (ledger/ledger.ts, policy_usage_adjust.sql).
--
-- A settlement stays HOT only where its page has room for the row's new version (migration 021).
-- With the smaller rows, 80 % put more of them on a page and left less room for their settled
-- versions: 95 % of settlements stayed HOT at 100,000 operations (99 % before), and sponsorships
-- took 792 bytes per operation (788 before). 78 % kept 99 % HOT, at 771; 75 % gave 781
-- (bench/results-2026-11-29-scale-100k-auth-bytes.txt). The rewrite below packs the existing rows
-- at the new fillfactor.
ALTER TABLE sponsorships SET (fillfactor = 78);
ALTER TABLE sponsorships DROP CONSTRAINT sponsorships_auth_id_check;
DROP INDEX sponsorships_auth_key;
ALTER TABLE sponsorships ALTER COLUMN auth_id TYPE bytea USING decode(substr(auth_id, 3), 'hex');
-- Every stored id passed the text rule (0x and 64 hexadecimal digits), so each decoded to 32
-- bytes: NOT VALID spares a second scan of the table.
ALTER TABLE sponsorships ADD CONSTRAINT sponsorships_auth_id_check CHECK (length(auth_id) = 32) NOT VALID;
CREATE UNIQUE INDEX sponsorships_auth_key ON sponsorships (auth_id);
