-- The budget levels announced by `budget.threshold`: the highest of 50, 75, 90 and 100 % that
-- `p_used` of `p_limit` has reached, or 0 below 50 %. Exact on numeric: no float rounding moves
-- a project across a level early or late.
CREATE OR REPLACE FUNCTION budget_level(p_used numeric, p_limit numeric) RETURNS smallint
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_limit IS NULL OR p_limit <= 0 THEN 0
    WHEN p_used * 100 >= p_limit * 100 THEN 100
    WHEN p_used * 100 >= p_limit * 90 THEN 90
    WHEN p_used * 100 >= p_limit * 75 THEN 75
    WHEN p_used * 100 >= p_limit * 50 THEN 50
    ELSE 0 END::smallint;
$$;

-- Emits `budget.threshold` for a level the window has not announced yet; the caller has already
-- recorded the level with the window's counter (once per window, whether or not anyone listens).
CREATE OR REPLACE FUNCTION budget_threshold_emit(p_project text, p_rule_id text, p_kind text, p_window text,
    p_window_start timestamptz, p_max_wei numeric, p_max_ops bigint, p_spent numeric, p_ops bigint,
    p_level smallint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(p_project, 'budget.threshold') THEN
    PERFORM emit_event(p_project, 'budget.threshold', jsonb_build_object(
      'ruleId', p_rule_id, 'kind', p_kind, 'percent', p_level, 'window', p_window,
      'windowStart', to_char(p_window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
      'maxWei', p_max_wei::text, 'maxOperations', p_max_ops,
      'spentWei', p_spent::text, 'operations', p_ops,
      'at', to_char(p_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  END IF;
END $$;
