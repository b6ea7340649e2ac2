-- A cap refused an operation: its window counts as reached (a spend cap is rarely met to the
-- wei), with the usage it has.
CREATE OR REPLACE FUNCTION policy_cap_refused(p_project text, r policy_rules, p_subject text, p_chain integer,
    p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_ws timestamptz := policy_window_start(r.window_kind, r.window_seconds, p_now);
  v_spent numeric;
  v_ops bigint;
BEGIN
  INSERT INTO policy_usage AS u (project_id, rule_id, subject, chain_id, window_start)
    VALUES (p_project, r.id, p_subject, p_chain, v_ws)
    ON CONFLICT (project_id, rule_id, subject, chain_id, window_start) DO UPDATE SET spent = u.spent
    RETURNING u.spent, u.ops INTO v_spent, v_ops;
  PERFORM policy_cap_reached(p_project, r, p_subject, p_chain, v_ws, v_spent, v_ops, p_now);
END $$;
