-- Authorization version 2 (DESIGN.md §1a): fee ceilings on every authorization, a record of
-- every operation the paymaster paid on chain, and two new kinds of ledger entry.

-- A compensating entry (`reversal`) undoes a deposit or a settlement that a reorganisation deeper
-- than the confirmation depth removed from the chain; `late_settle` charges an operation that the
-- chain shows after its reservation was released. Both keep the ledger append-only.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_amount CHECK (
  (kind = 'reserve' AND amount <= 0)
  OR (kind IN ('deposit', 'release') AND amount >= 0)
  OR (kind = 'late_settle' AND amount <= 0)
  OR kind IN ('settle', 'reversal'));
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check
  CHECK (kind IN ('deposit', 'reserve', 'settle', 'release', 'reversal', 'late_settle'));

-- What the signed authorization allows, besides estimated_gas (the ceiling on the operation's
-- total gas): the fee ceilings it binds, and the paymaster it was signed for. NULL on v1 rows.
ALTER TABLE sponsorships ADD COLUMN max_fee_per_gas numeric(78, 0) CHECK (max_fee_per_gas >= 0);
ALTER TABLE sponsorships ADD COLUMN max_priority_fee_per_gas numeric(78, 0)
  CHECK (max_priority_fee_per_gas >= 0 AND max_priority_fee_per_gas <= max_fee_per_gas);
ALTER TABLE sponsorships ADD COLUMN paymaster text CHECK (paymaster ~ '^0x[0-9a-f]{40}$');

-- Every UserOperationEvent paid by one of our paymasters, as the settlement watcher read it.
-- A log is identified by its block hash and index, so a reorganised copy of the same operation
-- is a new row. `billed` is what a gas tank was charged for it; the rest is unattributed spend.
CREATE TABLE chain_operations (
  chain_id integer NOT NULL,
  block_hash text NOT NULL,
  log_index integer NOT NULL,
  block_number bigint NOT NULL,
  tx_hash text NOT NULL,
  paymaster text NOT NULL,
  user_op_hash text NOT NULL,
  sender text NOT NULL,
  auth_id text,
  project_id text REFERENCES projects (id),
  success boolean NOT NULL,
  prefund_too_low boolean NOT NULL DEFAULT false,
  actual_gas_used numeric(78, 0) NOT NULL CHECK (actual_gas_used >= 0),
  actual_gas_cost numeric(78, 0) NOT NULL CHECK (actual_gas_cost >= 0),
  billed numeric(78, 0) NOT NULL CHECK (billed >= 0 AND billed <= actual_gas_cost),
  -- Why the operation is not (fully) billed; NULL when it is.
  unbilled_reason text,
  -- Set when a reorganisation removed the block; its billing was then compensated.
  orphaned_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, block_hash, log_index)
);
CREATE INDEX chain_operations_by_block ON chain_operations (chain_id, block_number);
CREATE INDEX chain_operations_unbilled ON chain_operations (chain_id) WHERE unbilled_reason IS NOT NULL;
