-- Reorganisations deeper than the confirmation depth (issue 7). The watchers remember the hashes
-- of the blocks they applied, so that a block the chain later replaced is noticed; what was found
-- is kept in chain_reorgs; and every deposit credit is kept with the block it came from, so that
-- a credit from a replaced block can be taken back. See src/chains/applied-blocks.ts.

-- Written only by src/chains/applied-blocks.ts. Sparse: a watcher remembers every block in which
-- it applied an effect and the last block of every range it committed, not every block it read.
-- Rows older than a retention window (in blocks, below the newest row) are pruned.
CREATE TABLE chain_applied_blocks (
  chain_id integer NOT NULL,
  watcher text NOT NULL,
  block_number bigint NOT NULL CHECK (block_number >= 0),
  block_hash text NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, watcher, block_number)
);

-- Written only by src/chains/applied-blocks.ts. At most one open (unreconciled) row per watcher:
-- a watcher finishes one reorganisation before it looks for the next.
CREATE TABLE chain_reorgs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  chain_id integer NOT NULL,
  watcher text NOT NULL CHECK (length(watcher) BETWEEN 1 AND 32),
  -- The first block the watcher has to read again; the blocks it remembered from here on are gone.
  fork_block bigint NOT NULL CHECK (fork_block >= 0),
  -- Blocks from fork_block through the chain's head when detected: an upper bound on how many
  -- blocks were replaced (the fork lies at or above fork_block).
  depth bigint NOT NULL CHECK (depth > 0),
  -- The remembered blocks the chain replaced: [{"number": "<decimal>", "hash": "0x…"}].
  orphaned jsonb NOT NULL,
  -- No remembered block survived: the fork lies below the retention window, and effects applied
  -- from blocks older than the window could not be checked.
  beyond_memory boolean NOT NULL DEFAULT false,
  detected_at timestamptz NOT NULL DEFAULT now(),
  reconciled_at timestamptz,
  -- What the watcher's compensation did, once reconciled.
  compensations integer CHECK (compensations >= 0),
  compensated_wei numeric(78, 0) CHECK (compensated_wei >= 0),
  -- Money that could not be taken back because the tank had already spent it: a debt per
  -- project, listed in shortfalls as [{"projectId": "…", "shortfallWei": "<decimal>"}].
  shortfall_wei numeric(78, 0) CHECK (shortfall_wei >= 0),
  shortfalls jsonb,
  CHECK ((reconciled_at IS NULL) = (compensations IS NULL)),
  CHECK ((reconciled_at IS NULL) = (shortfall_wei IS NULL))
);
CREATE UNIQUE INDEX chain_reorgs_one_open ON chain_reorgs (chain_id, watcher) WHERE reconciled_at IS NULL;
CREATE INDEX chain_reorgs_by_chain ON chain_reorgs (chain_id, detected_at DESC);

-- Written only by src/funding/store.ts (the deposit watcher). One row per crediting of a
-- transfer: a transfer is named by (chain, transaction, frame path) as in its ledger reference,
-- and it is credited again (inclusion 1, 2, …) only after a reorganisation took the earlier credit
-- back. `reference` is the deposit's ledger reference; `reversed` is what the reversal took back
-- (less than `amount` when the tank had spent the rest).
CREATE TABLE chain_deposits (
  chain_id integer NOT NULL,
  tx_hash text NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  frame_path text NOT NULL CHECK (frame_path ~ '^[0-9]+(\.[0-9]+)*$'),
  inclusion integer NOT NULL CHECK (inclusion >= 0),
  block_number bigint NOT NULL CHECK (block_number >= 0),
  block_hash text NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
  project_id text NOT NULL REFERENCES projects (id),
  address text NOT NULL,
  amount numeric(78, 0) NOT NULL CHECK (amount > 0),
  reference text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  orphaned_at timestamptz,
  reorg_id bigint REFERENCES chain_reorgs (id),
  reversed numeric(78, 0) CHECK (reversed >= 0 AND reversed <= amount),
  PRIMARY KEY (chain_id, tx_hash, frame_path, inclusion),
  CHECK ((orphaned_at IS NULL) = (reorg_id IS NULL)),
  CHECK ((orphaned_at IS NULL) = (reversed IS NULL))
);
-- A transfer has at most one live credit: re-reading a block never credits it twice.
CREATE UNIQUE INDEX chain_deposits_live ON chain_deposits (chain_id, tx_hash, frame_path) WHERE orphaned_at IS NULL;
CREATE INDEX chain_deposits_by_block ON chain_deposits (chain_id, block_hash);
CREATE INDEX chain_deposits_by_reorg ON chain_deposits (reorg_id) WHERE reorg_id IS NOT NULL;
CREATE INDEX chain_deposits_by_project ON chain_deposits (project_id, chain_id) WHERE orphaned_at IS NOT NULL;
