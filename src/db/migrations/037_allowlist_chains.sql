-- An allowlist entry names its chain, or every chain (issue 23): a contract address on one chain is
-- not the same contract on another, so an entry made for one chain must not let the same address
-- be called on the next chain a deployment serves. NULL means every chain, chosen explicitly.
-- Every existing entry was made when 14601 was the only chain served, and stays that chain's.
ALTER TABLE allowlist_entries ADD COLUMN chain_id integer CHECK (chain_id > 0);
UPDATE allowlist_entries SET chain_id = 14601;
ALTER TABLE allowlist_entries DROP CONSTRAINT allowlist_entries_pkey;
-- One entry per (project, chain or every chain, contract, function).
CREATE UNIQUE INDEX allowlist_entries_key
  ON allowlist_entries (project_id, COALESCE(chain_id, 0), target_contract, function_selector);
