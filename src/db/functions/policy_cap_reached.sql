-- `cap.reached`, once per (rule, subject, chain, window): the window's row is marked when it is
-- emitted. Counters are per chain (migration 038), so the event names the chain that reached it.
CREATE OR REPLACE FUNCTION policy_cap_reached(p_project text, r policy_rules, p_subject text, p_chain integer,
    p_ws timestamptz, p_spent numeric, p_ops bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE policy_usage SET reached_at = p_now
    WHERE project_id = p_project AND rule_id = r.id AND subject = p_subject AND chain_id = p_chain
      AND window_start = p_ws AND reached_at IS NULL;
  IF FOUND THEN
    PERFORM emit_event(p_project, 'cap.reached', jsonb_build_object(
      'ruleId', r.id, 'kind', r.kind, 'chainId', p_chain,
      'sender', CASE WHEN p_subject = '*' THEN NULL ELSE p_subject END,
      'window', r.window_kind, 'windowSeconds', r.window_seconds,
      'windowStart', to_char(p_ws AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
      'maxWei', r.max_wei::text, 'maxOperations', r.max_operations,
      'spentWei', p_spent::text, 'operations', p_ops,
      'at', to_char(p_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  END IF;
END $$;
