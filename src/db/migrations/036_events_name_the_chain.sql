-- Every webhook payload names its chain (issue 23). budget.threshold takes the chain of the
-- daily cap that crossed a level (null for a policy budget, which counts every chain); its
-- function gains that argument, so the old signature goes (db/functions/budget_threshold_emit.sql
-- is its replacement; on a new database it does not exist yet).
DROP FUNCTION IF EXISTS budget_threshold_emit(text, text, text, text, timestamptz, numeric, bigint, numeric, bigint, smallint, timestamptz);
