-- 002 created reserve_sponsorship (one reservation per call); batches replace it. A new file, so
-- that databases which already applied 002 get the new function too.
DROP FUNCTION IF EXISTS reserve_sponsorship(text, text, text, text, bigint, integer, text, text, text, bigint, numeric, bigint, bigint, text);

-- Reservations for one project, in one statement and one round trip. Concurrent authorizations
-- of a project arrive here together (see ledger/batcher.ts), so the project's row is locked and
-- its commit flushed once per batch instead of once per request: that row is the one thing every
-- authorization of a project must serialise on.
--
-- Each item is decided on its own, in order, under the project's row lock: an idempotent replay,
-- or the allowlist, the tank (never below zero), the daily cap, then the authorization record
-- and its ledger entry. Refusals leave no trace. Nothing raises, so one item never undoes another.
CREATE FUNCTION reserve_sponsorships(p_project text, p_items jsonb)
RETURNS TABLE (idx integer, outcome text, stored_digest text, stored_response text)
LANGUAGE plpgsql AS $$
DECLARE
  v_balance numeric;
  v_cap numeric;
  v_spent numeric;
  v_taken numeric := 0;
  v_day date := (now() AT TIME ZONE 'UTC')::date;
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
      target text, selector text, gas bigint, cost numeric, valid_after bigint, valid_until bigint, response text)
  LOOP
    IF it.nonce IS NOT NULL THEN
      -- A nonce is remembered for 24 hours; after that it is free to be used again.
      UPDATE sponsorships SET client_nonce = NULL
        WHERE project_id = p_project AND client_nonce = it.nonce AND created_at < now() - interval '24 hours';
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
          estimated_gas, max_gas_cost, valid_after, valid_until, client_nonce, request_digest, response)
        VALUES (it.auth_id, p_project, it.key_id, it.chain_id, it.sender, it.target, it.selector,
          it.gas, it.cost, it.valid_after, it.valid_until, it.nonce, it.digest, it.response);
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
