-- The one way SQL writes an event, so that every writer (reservations, settlement, credits,
-- triggers) produces the same row.
CREATE OR REPLACE FUNCTION emit_event(p_project text, p_type text, p_payload jsonb) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO event_outbox (project_id, type, payload) VALUES (p_project, p_type, p_payload);
$$;
