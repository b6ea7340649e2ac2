-- Issue 21: bytes per operation. Two indexes held the whole of what they find by:
--
-- sponsorships_auth_key, the authorization id's 32 bytes under a unique index: 78 bytes per
-- operation at 100,000 operations, the ids being random and the pages about 70 % full. It is now
-- the id's first 64 bits as a bigint (db/bytes.ts authIdKey), an entry of two words. A lookup
-- compares the whole id too (ledger/ledger.ts, policy_usage_adjust.sql), so a shared key finds the
-- right row. That an id is never used twice no longer rests on this index: every sponsorship is
-- written with its `reserve` ledger entry, whose reference is the id under the ledger's unique
-- key, and reserve_sponsorships.sql raises unique_violation, as the index did, when an entry was
-- already there.
CREATE INDEX sponsorships_by_auth_key ON sponsorships
  ((('x' || encode(substr(auth_id, 1, 8), 'hex'))::bit(64)::bigint));
DROP INDEX sponsorships_auth_key;

-- ledger_entries_by_project_id, (project_id, id): the project's text in each of the two entries an
-- operation writes, 99 bytes per operation at 100,000 operations with a 20-character id. It is now
-- the first 64 bits of the MD5 of the project's id, then the entry's id: two bigints (db/bytes.ts
-- projectKey). The parity tails and the checkpoints read the amounts from the heap and compare the
-- project there; the count that finds the projects due for a checkpoint (once a minute) does not,
-- since a shared key could only make a project due early (ledger/checkpoints.ts). That count read
-- the old index alone; it now reads the entries' rows too, as an index on an expression requires.
CREATE INDEX ledger_entries_by_project_key ON ledger_entries
  ((('x' || left(md5(project_id), 16))::bit(64)::bigint), id);
DROP INDEX ledger_entries_by_project_id;
