-- A settled sponsorship's transaction and operation hashes as 32 bytes each instead of 66
-- characters of text (issue 21): 68 bytes less in every settled row, and a settlement grows its
-- row by that much less, which leaves more of them room on their page for a HOT update.
-- The table is rewritten once. ledger/ledger.ts writes them, analytics/store.ts and
-- db/functions/sponsorships_emit_status.sql read them back as 0x-prefixed hexadecimal.
ALTER TABLE sponsorships
  ALTER COLUMN tx_hash TYPE bytea USING decode(substr(tx_hash, 3), 'hex'),
  ALTER COLUMN user_op_hash TYPE bytea USING decode(substr(user_op_hash, 3), 'hex');
