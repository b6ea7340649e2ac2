-- Fan-out: every event gets a delivery per subscribed endpoint, in the event's transaction.
CREATE OR REPLACE FUNCTION event_outbox_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT e.id, n.id FROM new_events n
    JOIN webhook_endpoints e ON e.project_id = n.project_id AND e.enabled
      AND (n.type = ANY (e.event_types) OR '*' = ANY (e.event_types));
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER event_outbox_fan_out AFTER INSERT ON event_outbox
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION event_outbox_fan_out();
