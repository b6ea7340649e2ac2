-- Paid operations folded into totals once they are old (issue 21: bytes per operation; and the
-- chain parity and the unattributed-spend readiness probe no longer sum every row ever paid).
--
-- A chain_operations row is what lets the watcher record a log once and a reorganisation undo
-- it. Once its block is days deep neither can happen again, and a fully billed operation's facts
-- are kept elsewhere: its sponsorship holds the hashes and the cost, the ledger the charge. The
-- maintenance job (retention/chain-operations.ts) therefore deletes such rows after
-- CHAIN_OPERATION_RETENTION_DAYS and adds them, in the same statement, to their paymaster's
-- totals here. Rows with an unbilled reason (spend no tank paid in full) are never folded:
-- operators read them one by one. Parity is the totals plus the rows left.
CREATE TABLE chain_operation_totals (
  chain_id integer NOT NULL,
  paymaster bytea NOT NULL CHECK (length(paymaster) = 20),
  -- The folded rows' blocks: the highest is the watcher's "already recorded" bound.
  first_block bigint NOT NULL,
  through_block bigint NOT NULL CHECK (through_block >= first_block),
  operations bigint NOT NULL CHECK (operations >= 0),
  paid numeric(78,0) NOT NULL CHECK (paid >= 0),
  billed numeric(78,0) NOT NULL CHECK (billed >= 0 AND billed <= paid),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, paymaster)
);

-- The fold takes the oldest rows first; the table keeps only the retention window, so this index
-- stays as small as the window.
CREATE INDEX chain_operations_by_age ON chain_operations (created_at);
