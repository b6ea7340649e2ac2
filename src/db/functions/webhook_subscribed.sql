-- Whether an enabled endpoint of the project wants events of this type ('*' = every type).
CREATE OR REPLACE FUNCTION webhook_subscribed(p_project text, p_type text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM webhook_endpoints e
    WHERE e.project_id = p_project AND e.enabled AND (p_type = ANY (e.event_types) OR '*' = ANY (e.event_types)));
$$;
