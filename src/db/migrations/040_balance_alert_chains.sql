-- A low-balance threshold per chain (issue 23). Each tank is in its own chain's currency, so one
-- figure in wei rarely fits them all: `low_balance_thresholds` maps a chain id (as text) to that
-- chain's own threshold in its smallest unit, or to JSON null for no alert on that chain. A chain
-- it does not name takes `low_balance_threshold`, the project's figure as before. The triggers
-- read both from the one settings row they already read.
ALTER TABLE project_webhook_settings ADD COLUMN low_balance_thresholds jsonb NOT NULL DEFAULT '{}';
