-- The one writer of daily_usage, what a project's daily cap has counted on a UTC day on one chain
-- (the cap is counted per chain, each in its own currency; migration 035): the
-- reservation counts its grants (reserve_sponsorships.sql); a settlement, a release or a reversal
-- gives back (a negative delta, never below zero, on a day that has a count), and a late charge
-- counts again (positive). plpgsql rather than SQL: its statements' plans are kept for the
-- session, where a SQL function's would be made again on every call (PostgreSQL 15).
--
-- A count that grows may cross a level of the daily cap (budget_level.sql, budget_threshold_emit.sql): the level is kept
-- with the day's row and announced once. The cap is read only then, from the project's row,
-- which the reservation has already locked.
CREATE OR REPLACE FUNCTION daily_usage_adjust(p_project text, p_chain integer, p_day date, p_delta numeric) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_spent numeric;
  v_alerted smallint;
  v_cap numeric;
  v_level smallint;
BEGIN
  IF p_delta < 0 THEN
    UPDATE daily_usage SET spent = GREATEST(spent + p_delta, 0)
      WHERE project_id = p_project AND chain_id = p_chain AND day = p_day;
  ELSIF p_delta > 0 THEN
    INSERT INTO daily_usage AS u (project_id, chain_id, day, spent) VALUES (p_project, p_chain, p_day, p_delta)
      ON CONFLICT (project_id, chain_id, day) DO UPDATE SET spent = u.spent + EXCLUDED.spent
      RETURNING u.spent, u.alerted_pct INTO v_spent, v_alerted;
    SELECT daily_cap INTO v_cap FROM projects WHERE id = p_project;
    IF v_cap IS NULL OR v_alerted >= 100 THEN
      RETURN;
    END IF;
    v_level := budget_level(v_spent, v_cap);
    IF v_level > v_alerted THEN
      UPDATE daily_usage SET alerted_pct = v_level
        WHERE project_id = p_project AND chain_id = p_chain AND day = p_day;
      PERFORM budget_threshold_emit(p_project, 'daily_cap', 'project_spend_cap', 'day', p_day::timestamp AT TIME ZONE 'UTC',
        v_cap, NULL, v_spent, NULL, v_level, now(), p_chain);
    END IF;
  END IF;
END $$;
