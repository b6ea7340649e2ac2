-- One event, for the writers that have one at a time (row-level triggers, the test event of an
-- endpoint): through emit_events, so that every event is written by the same statement.
-- PL/pgSQL for the reason emit_events.sql gives.
CREATE OR REPLACE FUNCTION emit_event(p_project text, p_type text, p_payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM emit_events(p_type, ARRAY[p_project], ARRAY[p_payload]);
END $$;
