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

-- Reservations for one project in one statement (replaces 003's function). New: the fee
-- ceilings and the paymaster an authorization was signed for are recorded with it, and time is
-- passed in (p_now) so that the daily cap and the 24-hour nonce memory run on the same clock as
-- the rest of authorize, not on the database's.
DROP FUNCTION IF EXISTS reserve_sponsorships(text, jsonb);
CREATE FUNCTION reserve_sponsorships(p_project text, p_items jsonb, p_now timestamptz)
RETURNS TABLE (idx integer, outcome text, stored_digest text, stored_response text)
LANGUAGE plpgsql AS $$
DECLARE
  v_balance numeric;
  v_cap numeric;
  v_spent numeric;
  v_taken numeric := 0;
  v_day date := (p_now AT TIME ZONE 'UTC')::date;
  v_found boolean;
  v_digest text;
  v_response text;
  it record;
BEGIN
  SELECT gas_tank_balance, daily_cap INTO v_balance, v_cap FROM projects WHERE id = p_project FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT x.idx, 'insufficient_balance'::text, NULL::text, NULL::text
      FROM jsonb_to_recordset(p_items) AS x(idx integer);
    RETURN;
  END IF;
  SELECT spent INTO v_spent FROM daily_usage WHERE project_id = p_project AND day = v_day;
  v_spent := COALESCE(v_spent, 0);

  FOR it IN SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, nonce text, digest text, auth_id text, key_id bigint, chain_id integer, sender text,
      target text, selector text, gas bigint, cost numeric, max_fee numeric, max_priority_fee numeric,
      paymaster text, valid_after bigint, valid_until bigint, response text)
  LOOP
    IF it.nonce IS NOT NULL THEN
      -- A nonce is remembered for 24 hours; after that it is free to be used again.
      UPDATE sponsorships SET client_nonce = NULL
        WHERE project_id = p_project AND client_nonce = it.nonce AND created_at < p_now - interval '24 hours';
      SELECT s.request_digest, s.response INTO v_digest, v_response FROM sponsorships s
        WHERE s.project_id = p_project AND s.client_nonce = it.nonce;
      IF FOUND THEN
        idx := it.idx; outcome := 'replay'; stored_digest := v_digest; stored_response := v_response;
        RETURN NEXT;
        CONTINUE;
      END IF;
    END IF;

    PERFORM 1 FROM allowlist_entries
      WHERE project_id = p_project AND target_contract = it.target AND function_selector = it.selector AND enabled;
    v_found := FOUND;
    idx := it.idx; stored_digest := NULL; stored_response := NULL;
    IF NOT v_found THEN
      outcome := 'not_allowlisted';
    ELSIF v_balance - v_taken < it.cost THEN
      outcome := 'insufficient_balance';
    ELSIF v_cap IS NOT NULL AND v_spent + it.cost > v_cap THEN
      outcome := 'daily_cap_exceeded';
    ELSE
      INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
          estimated_gas, max_gas_cost, max_fee_per_gas, max_priority_fee_per_gas, paymaster,
          valid_after, valid_until, client_nonce, request_digest, response, created_at)
        VALUES (it.auth_id, p_project, it.key_id, it.chain_id, it.sender, it.target, it.selector,
          it.gas, it.cost, it.max_fee, it.max_priority_fee, it.paymaster,
          it.valid_after, it.valid_until, it.nonce, it.digest, it.response, p_now);
      INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES (p_project, 'reserve', -it.cost, it.auth_id);
      v_taken := v_taken + it.cost;
      v_spent := v_spent + it.cost;
      outcome := 'reserved';
    END IF;
    RETURN NEXT;
  END LOOP;

  IF v_taken > 0 THEN
    UPDATE projects SET gas_tank_balance = gas_tank_balance - v_taken WHERE id = p_project;
    INSERT INTO daily_usage AS u (project_id, day, spent) VALUES (p_project, v_day, v_taken)
      ON CONFLICT (project_id, day) DO UPDATE SET spent = u.spent + EXCLUDED.spent;
  END IF;
END $$;
