-- Whether an enabled endpoint of any of the projects wants events of this type ('*' = every type).
-- PL/pgSQL, so that its query is planned once per connection: a SQL function that is not inlined
-- plans its body again in every statement that calls it, which cost the reservation's former
-- sponsorship.sponsored trigger (migration 055) 0.35-0.45 ms per batch, subscriber or not.
CREATE OR REPLACE FUNCTION webhook_subscribed_any(p_projects text[], p_type text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN EXISTS (SELECT 1 FROM webhook_endpoints e
    WHERE e.project_id = ANY (p_projects) AND e.enabled
      AND (p_type = ANY (e.event_types) OR '*' = ANY (e.event_types)));
END $$;
