-- Smaller keys for the two append-only tables every operation writes to (issue 21: bytes per
-- operation at 10 million operations).
--
-- 1. Ledger entries are unique per (kind, reference), and the reference of an operation's
--    entries is its authorization id: 66 random hexadecimal characters. The unique index on the
--    two texts cost 275 bytes per operation (two entries each, about 80 bytes a key, pages about
--    70 % full since the ids arrive in no order). It is replaced by a unique index on a 16-byte
--    digest of the two: the MD5 of kind, a newline and reference, as a uuid (md5() is the one
--    digest PostgreSQL computes from text in an index expression). Two different pairs sharing a
--    key would need an MD5 collision between references nobody chooses freely: ids we draw at
--    random, and references built from transaction and block hashes. A forged collision needs
--    both inputs' bytes chosen by the forger.
--    ledger_move.sql conflicts on the same expression.
CREATE UNIQUE INDEX ledger_entries_reference_key ON ledger_entries ((md5(kind || E'\n' || reference)::uuid));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_reference_key;

-- 2. chain_operations keeps the hashes and addresses of each paid operation as bytes, not as
--    0x-prefixed hexadecimal text: 33 bytes for a hash instead of 67, 21 for an address instead
--    of 43. The row shrinks from about 470 bytes to about 290, and its primary key (chain, block
--    hash, log index) from 169 to about 80 bytes per operation. settlement/store.ts converts at
--    the boundary (decode and encode); nothing outside it reads the table.
ALTER TABLE chain_operations
  ALTER COLUMN block_hash TYPE bytea USING decode(substr(block_hash, 3), 'hex'),
  ALTER COLUMN tx_hash TYPE bytea USING decode(substr(tx_hash, 3), 'hex'),
  ALTER COLUMN paymaster TYPE bytea USING decode(substr(paymaster, 3), 'hex'),
  ALTER COLUMN user_op_hash TYPE bytea USING decode(substr(user_op_hash, 3), 'hex'),
  ALTER COLUMN sender TYPE bytea USING decode(substr(sender, 3), 'hex'),
  ALTER COLUMN auth_id TYPE bytea USING decode(substr(auth_id, 3), 'hex');
ALTER TABLE chain_operations
  ADD CONSTRAINT chain_operations_byte_lengths CHECK (
    length(block_hash) = 32 AND length(tx_hash) = 32 AND length(user_op_hash) = 32
    AND length(paymaster) = 20 AND length(sender) = 20 AND (auth_id IS NULL OR length(auth_id) = 32));
