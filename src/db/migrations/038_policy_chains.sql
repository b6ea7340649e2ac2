-- Policies per chain (issue 23). A rule targets one chain, or every chain (chain_id NULL, which
-- every existing rule keeps: they applied to everything). Its counters are kept per chain: a
-- spend cap is wei of one chain's currency, and a rule for every chain counts each chain apart,
-- against the same figure. Every counter so far was counted on 14601, the only chain served.
ALTER TABLE policy_rules ADD COLUMN chain_id integer CHECK (chain_id > 0);

ALTER TABLE policy_usage ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE policy_usage ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE policy_usage DROP CONSTRAINT policy_usage_pkey;
ALTER TABLE policy_usage ADD PRIMARY KEY (project_id, rule_id, subject, chain_id, window_start);

-- Their replacements take the chain (db/functions; on a new database they do not exist yet).
DROP FUNCTION IF EXISTS policy_cap_reached(text, policy_rules, text, timestamptz, numeric, bigint, timestamptz);
DROP FUNCTION IF EXISTS policy_cap_refused(text, policy_rules, text, timestamptz);
