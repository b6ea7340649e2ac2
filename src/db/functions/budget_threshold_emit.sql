-- Emits `budget.threshold` for a level the window has not announced yet; the caller has already
-- recorded the level with the window's counter (once per window, whether or not anyone listens).
-- p_chain is the chain whose count crossed the level: budgets are counted per chain (the daily cap
-- in daily_usage, a policy's in policy_usage; migrations 035 and 038).
CREATE OR REPLACE FUNCTION budget_threshold_emit(p_project text, p_rule_id text, p_kind text, p_window text,
    p_window_start timestamptz, p_max_wei numeric, p_max_ops bigint, p_spent numeric, p_ops bigint,
    p_level smallint, p_now timestamptz, p_chain integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(p_project, 'budget.threshold') THEN
    PERFORM emit_event(p_project, 'budget.threshold', jsonb_build_object(
      'ruleId', p_rule_id, 'kind', p_kind, 'chainId', p_chain, 'percent', p_level, 'window', p_window,
      'windowStart', to_char(p_window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
      'maxWei', p_max_wei::text, 'maxOperations', p_max_ops,
      'spentWei', p_spent::text, 'operations', p_ops,
      'at', to_char(p_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  END IF;
END $$;
