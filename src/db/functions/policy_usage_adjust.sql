-- Gives back to the windows an authorization was counted in: `p_spent` wei and `p_ops`
-- operations (negative amounts count again, for an operation charged after its release), on the
-- authorization's chain (counters are per chain, migration 038). plpgsql rather than SQL, as
-- daily_usage_adjust.sql: its statement's plan is kept for the session, where a SQL function's was
-- made again on every call (0.56 ms of each settlement's 10 ms, 2026-11-30).
CREATE OR REPLACE FUNCTION policy_usage_adjust(p_auth_id text, p_spent numeric, p_ops bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE policy_usage u
    SET spent = GREATEST(u.spent - p_spent, 0), ops = GREATEST(u.ops - p_ops, 0)
  FROM sponsorships s, jsonb_to_recordset(s.policy_usage) AS c(rule text, subject text, window_start timestamptz)
  -- Through the index on the id's first 64 bits (auth_id_key.sql).
  WHERE auth_id_key(s.auth_id) = auth_id_key(decode(substr(p_auth_id, 3), 'hex'))
    AND s.auth_id = decode(substr(p_auth_id, 3), 'hex') AND s.policy_usage IS NOT NULL
    AND u.project_id = s.project_id AND u.rule_id = c.rule AND u.subject = c.subject
    AND u.chain_id = s.chain_id AND u.window_start = c.window_start;
END $$;
