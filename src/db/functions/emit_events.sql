-- The one way SQL writes events: one statement for any number of them, so that a trigger over a
-- batch (a reservation inserts up to a batch of authorizations in one statement) writes their
-- events, and their fan-out to webhook_deliveries, once per statement rather than once per row.
-- Events are written in array order (event ids follow it).
--
-- PL/pgSQL rather than SQL (issue 22): a SQL function that is not inlined, as one that inserts
-- never is, plans its body again at every call, and this one is called in the transaction of
-- every authorization of a subscribed project. PL/pgSQL keeps the INSERT's plan per connection.
CREATE OR REPLACE FUNCTION emit_events(p_type text, p_projects text[], p_payloads jsonb[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_outbox (project_id, type, payload)
    SELECT e.project_id, p_type, e.payload
    FROM unnest(p_projects, p_payloads) WITH ORDINALITY AS e (project_id, payload, nth)
    ORDER BY e.nth;
END $$;
