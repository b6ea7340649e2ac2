-- Reserving at authorize happens in one statement, one round trip, all or nothing: it replays
-- an idempotent request, or checks the allowlist, takes the cost from the tank (only if the tank holds it), counts it
-- against the daily cap, records the authorization and appends the ledger entry.
CREATE FUNCTION reserve_sponsorship(
  p_project text,
  p_nonce text,
  p_request_digest text,
  p_auth_id text,
  p_api_key_id bigint,
  p_chain_id integer,
  p_sender text,
  p_target text,
  p_selector text,
  p_estimated_gas bigint,
  p_cost numeric,
  p_valid_after bigint,
  p_valid_until bigint,
  p_response text
) RETURNS TABLE (outcome text, stored_digest text, stored_response text)
LANGUAGE plpgsql AS $$
DECLARE
  v_cap numeric;
  v_found boolean;
  v_day date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
  IF p_nonce IS NOT NULL THEN
    -- A nonce is remembered for 24 hours; after that it is free to be used again.
    UPDATE sponsorships SET client_nonce = NULL
      WHERE project_id = p_project AND client_nonce = p_nonce AND created_at < now() - interval '24 hours';
    RETURN QUERY SELECT 'replay'::text, s.request_digest, s.response FROM sponsorships s
      WHERE s.project_id = p_project AND s.client_nonce = p_nonce;
    IF FOUND THEN RETURN; END IF;
  END IF;

  PERFORM 1 FROM allowlist_entries
    WHERE project_id = p_project AND target_contract = p_target AND function_selector = p_selector AND enabled;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'not_allowlisted'::text, NULL::text, NULL::text;
    RETURN;
  END IF;

  UPDATE projects SET gas_tank_balance = gas_tank_balance - p_cost
    WHERE id = p_project AND gas_tank_balance >= p_cost
    RETURNING daily_cap INTO v_cap;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'insufficient_balance'::text, NULL::text, NULL::text;
    RETURN;
  END IF;

  INSERT INTO daily_usage AS u (project_id, day, spent) VALUES (p_project, v_day, p_cost)
    ON CONFLICT (project_id, day) DO UPDATE SET spent = u.spent + EXCLUDED.spent
    WHERE v_cap IS NULL OR u.spent + EXCLUDED.spent <= v_cap;
  v_found := FOUND;
  IF v_cap IS NOT NULL AND (NOT v_found OR p_cost > v_cap) THEN
    -- Raising undoes the balance update above: the statement is all or nothing.
    RAISE EXCEPTION 'daily_cap_exceeded' USING ERRCODE = 'P0001';
  END IF;

  INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
      estimated_gas, max_gas_cost, valid_after, valid_until, client_nonce, request_digest, response)
    VALUES (p_auth_id, p_project, p_api_key_id, p_chain_id, p_sender, p_target, p_selector,
      p_estimated_gas, p_cost, p_valid_after, p_valid_until, p_nonce, p_request_digest, p_response)
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    -- A concurrent request with the same nonce committed first; the caller retries and replays it.
    RAISE EXCEPTION 'idempotency_race' USING ERRCODE = 'P0001';
  END IF;

  INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES (p_project, 'reserve', -p_cost, p_auth_id);
  RETURN QUERY SELECT 'reserved'::text, p_request_digest, p_response;
END $$;
