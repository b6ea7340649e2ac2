-- One gas tank per (project, chain), in that chain's native currency (issue 23; DESIGN.md §2,
-- "Chains"). Nothing moves value between chains: every ledger entry, checkpoint and day of the
-- daily cap names its chain, and a chain's reservations are decided on that chain's tank alone.
--
-- A project has a home chain, 14601 for every project that exists now. Its tank stays
-- projects.gas_tank_balance, the balance every response of the interface shows; the project's
-- tanks on its other chains are rows of gas_tanks, created by their first credit. ledger_move.sql
-- remains the one writer of both. Every existing entry, checkpoint and day of usage was made on
-- 14601, which is what the defaults below record (a constant default: no table is rewritten).
ALTER TABLE projects ADD COLUMN home_chain_id integer NOT NULL DEFAULT 14601 CHECK (home_chain_id > 0);

CREATE TABLE gas_tanks (
  project_id text NOT NULL REFERENCES projects (id),
  chain_id integer NOT NULL CHECK (chain_id > 0),
  balance numeric(78, 0) NOT NULL DEFAULT 0 CHECK (balance >= 0),
  PRIMARY KEY (project_id, chain_id)
);

ALTER TABLE ledger_entries ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE ledger_entries ALTER COLUMN chain_id DROP DEFAULT;
-- Parity and checkpoints sum a project's entries after an id, per chain: the chain joins the
-- amount in the index, so that stays an index-only range.
CREATE INDEX ledger_entries_by_project_chain ON ledger_entries (project_id, id) INCLUDE (chain_id, amount);
DROP INDEX ledger_entries_by_project_id;
ALTER INDEX ledger_entries_by_project_chain RENAME TO ledger_entries_by_project_id;

ALTER TABLE ledger_checkpoints ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE ledger_checkpoints ALTER COLUMN chain_id DROP DEFAULT;

ALTER TABLE daily_usage ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE daily_usage ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE daily_usage DROP CONSTRAINT daily_usage_pkey;
ALTER TABLE daily_usage ADD PRIMARY KEY (project_id, chain_id, day);

-- Their replacements take the chain (db/functions; on a new database they do not exist yet).
DROP FUNCTION IF EXISTS ledger_move(text, text, numeric[], text[]);
DROP FUNCTION IF EXISTS daily_usage_adjust(text, date, numeric);
