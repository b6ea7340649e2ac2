-- Releases a reservation whose window ended without its operation appearing (ledger/ledger.ts
-- release), at most once, in one statement: the sponsorship marked expired if it is still
-- pending, the whole reservation back to the tank through ledger_move, the day's cap count and
-- the policy windows given back. True when it released. Five statements and a transaction of
-- their own before, each a round trip, for every reservation the watcher releases one after
-- another.
CREATE OR REPLACE FUNCTION release_sponsorship(p_auth_id text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  v_auth bytea := decode(substr(p_auth_id, 3), 'hex');
  v_project text;
  v_chain integer;
  v_amount numeric;
  v_day date;
BEGIN
  -- Through the index on the id's first 64 bits (auth_id_key.sql).
  UPDATE sponsorships SET status = 'expired', settled_at = now()
    WHERE auth_id_key(auth_id) = auth_id_key(v_auth) AND auth_id = v_auth AND status = 'pending'
    RETURNING project_id, chain_id, max_gas_cost, (created_at AT TIME ZONE 'UTC')::date
    INTO v_project, v_chain, v_amount, v_day;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM ledger_move(v_project, v_chain, 'release', ARRAY[v_amount], ARRAY[p_auth_id]);
  IF v_amount <> 0 THEN
    PERFORM daily_usage_adjust(v_project, v_chain, v_day, -v_amount);
  END IF;
  PERFORM policy_usage_adjust(p_auth_id, v_amount, 1);
  RETURN true;
END $$;
