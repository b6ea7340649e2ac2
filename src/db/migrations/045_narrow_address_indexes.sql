-- Issue 21: bytes per operation. The sender and target indexes of sponsorships held
-- (project_id, key of the address, id): the project's text in every entry. PostgreSQL fills a
-- B-tree page before splitting it only when it can tell insertions ascend, and it looks for that
-- only on pages of entries no wider than two bigints; wider entries split their page in half.
-- With few targets every target's range grows at its right end, inside the index, and each of its
-- pages was left half full: 100 bytes per operation by target at 100,000 operations (leaf density
-- 53 %), 79 by sender, against 50 for (project_id, id).
--
-- The key is now one bigint for the project and the address together (the first 64 bits of the
-- MD5 of "project/address", db/bytes.ts projectAddressKey), followed by the id: two bigints. A
-- shared key is possible, so a read still compares the project and the address themselves.
CREATE INDEX sponsorships_by_project_sender ON sponsorships
  ((('x' || left(md5(project_id || '/' || sender), 16))::bit(64)::bigint), id);
DROP INDEX sponsorships_by_sender_key;

CREATE INDEX sponsorships_by_project_target ON sponsorships
  ((('x' || left(md5(project_id || '/' || target), 16))::bit(64)::bigint), id);
DROP INDEX sponsorships_by_target_key;

-- Two entries per operation (its reservation and its settlement). The chain and the amount in
-- the index (migration 035) made a checkpoint's tail an index-only scan; they were a third of
-- every entry. The tail is the entries since the latest checkpoint, at the end of the table, so
-- reading their amounts from the heap touches the few pages the newest entries fill.
CREATE INDEX ledger_entries_by_project_narrow ON ledger_entries (project_id, id);
DROP INDEX ledger_entries_by_project_id;
ALTER INDEX ledger_entries_by_project_narrow RENAME TO ledger_entries_by_project_id;
