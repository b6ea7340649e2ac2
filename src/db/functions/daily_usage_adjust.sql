-- The one writer of daily_usage, what a project's daily cap has counted on a UTC day: the
-- reservation counts its grants (reserve_sponsorships.sql); a settlement, a release or a reversal
-- gives back (a negative delta, never below zero, on a day that has a count), and a late charge
-- counts again (positive). plpgsql rather than SQL: its statements' plans are kept for the
-- session, where a SQL function's would be made again on every call (PostgreSQL 15).
CREATE OR REPLACE FUNCTION daily_usage_adjust(p_project text, p_day date, p_delta numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_delta < 0 THEN
    UPDATE daily_usage SET spent = GREATEST(spent + p_delta, 0) WHERE project_id = p_project AND day = p_day;
  ELSIF p_delta > 0 THEN
    INSERT INTO daily_usage AS u (project_id, day, spent) VALUES (p_project, p_day, p_delta)
      ON CONFLICT (project_id, day) DO UPDATE SET spent = u.spent + EXCLUDED.spent;
  END IF;
END $$;
