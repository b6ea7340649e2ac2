-- Spend alerts at thresholds (issue 24): `budget.threshold` when a project-wide budget — the
-- daily cap, or a project spend or count cap — is used to 50, 75, 90 and 100 %, each once per
-- window. The highest level already announced is kept with the window's counter, so a release
-- that brings the count back down and a later reservation that crosses again stay silent.
ALTER TABLE daily_usage ADD COLUMN alerted_pct smallint NOT NULL DEFAULT 0;
ALTER TABLE policy_usage ADD COLUMN alerted_pct smallint NOT NULL DEFAULT 0;
