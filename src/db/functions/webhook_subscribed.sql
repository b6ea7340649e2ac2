-- Whether an enabled endpoint of the project wants events of this type ('*' = every type): the
-- one-project case of webhook_subscribed_any.sql, which holds the rule.
CREATE OR REPLACE FUNCTION webhook_subscribed(p_project text, p_type text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN webhook_subscribed_any(ARRAY[p_project], p_type);
END $$;
