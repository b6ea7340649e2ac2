-- Whole-operation authorizations (ERC-7677, DESIGN.md §1a): the service sees the operation and
-- every call it makes, so an authorization records its mode and all of its calls, and the
-- reservation checks that every call is allowlisted (naming the first that is not).
ALTER TABLE sponsorships ADD COLUMN mode text NOT NULL DEFAULT 'call' CHECK (mode IN ('call', 'operation'));
-- [{target, selector}] for a whole-operation authorization; NULL for a call authorization, whose
-- one call is (target, selector).
ALTER TABLE sponsorships ADD COLUMN calls jsonb;

-- ERC-7677's `sponsor: {name, icon}`: the project's name and this icon (a URL or a data URI).
ALTER TABLE projects ADD COLUMN sponsor_icon text CHECK (length(sponsor_icon) <= 4096);

DROP FUNCTION reserve_sponsorships(text, jsonb, timestamptz);
CREATE FUNCTION reserve_sponsorships(p_project text, p_items jsonb, p_now timestamptz)
RETURNS TABLE (idx integer, outcome text, stored_digest text, stored_response text, call_index integer)
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
  v_missing integer;
  it record;
BEGIN
  SELECT gas_tank_balance, daily_cap INTO v_balance, v_cap FROM projects WHERE id = p_project FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT x.idx, 'insufficient_balance'::text, NULL::text, NULL::text, NULL::integer
      FROM jsonb_to_recordset(p_items) AS x(idx integer);
    RETURN;
  END IF;
  SELECT spent INTO v_spent FROM daily_usage WHERE project_id = p_project AND day = v_day;
  v_spent := COALESCE(v_spent, 0);

  FOR it IN SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, nonce text, digest text, auth_id text, key_id bigint, chain_id integer, sender text,
      target text, selector text, gas bigint, cost numeric, max_fee numeric, max_priority_fee numeric,
      paymaster text, valid_after bigint, valid_until bigint, response text, mode text, calls jsonb)
  LOOP
    IF it.nonce IS NOT NULL THEN
      -- A nonce is remembered for 24 hours; after that it is free to be used again.
      UPDATE sponsorships SET client_nonce = NULL
        WHERE project_id = p_project AND client_nonce = it.nonce AND created_at < p_now - interval '24 hours';
      SELECT s.request_digest, s.response INTO v_digest, v_response FROM sponsorships s
        WHERE s.project_id = p_project AND s.client_nonce = it.nonce;
      IF FOUND THEN
        idx := it.idx; outcome := 'replay'; stored_digest := v_digest; stored_response := v_response;
        call_index := NULL;
        RETURN NEXT;
        CONTINUE;
      END IF;
    END IF;

    -- Every call must be allowlisted: the first one that is not is named in the refusal.
    SELECT min(c.ord - 1)::integer INTO v_missing
      FROM ROWS FROM (jsonb_to_recordset(COALESCE(it.calls, jsonb_build_array(jsonb_build_object(
          'target', it.target, 'selector', it.selector)))) AS (target text, selector text))
        WITH ORDINALITY AS c(target, selector, ord)
      WHERE NOT EXISTS (SELECT 1 FROM allowlist_entries a
        WHERE a.project_id = p_project AND a.target_contract = c.target AND a.function_selector = c.selector
          AND a.enabled);
    v_found := v_missing IS NULL;
    idx := it.idx; stored_digest := NULL; stored_response := NULL; call_index := v_missing;
    IF NOT v_found THEN
      outcome := 'not_allowlisted';
    ELSIF v_balance - v_taken < it.cost THEN
      outcome := 'insufficient_balance';
    ELSIF v_cap IS NOT NULL AND v_spent + it.cost > v_cap THEN
      outcome := 'daily_cap_exceeded';
    ELSE
      INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
          estimated_gas, max_gas_cost, max_fee_per_gas, max_priority_fee_per_gas, paymaster,
          valid_after, valid_until, client_nonce, request_digest, response, created_at, mode, calls)
        VALUES (it.auth_id, p_project, it.key_id, it.chain_id, it.sender, it.target, it.selector,
          it.gas, it.cost, it.max_fee, it.max_priority_fee, it.paymaster,
          it.valid_after, it.valid_until, it.nonce, it.digest, it.response, p_now,
          COALESCE(it.mode, 'call'), it.calls);
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
