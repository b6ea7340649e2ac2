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
