-- Fan-out: every event gets a delivery per subscribed endpoint, in the event's transaction.
--
-- Each endpoint is locked FOR KEY SHARE, once per statement, as the deliveries' foreign key used to
-- lock it once per delivery (migration 057): an endpoint being deleted meanwhile is waited for and
-- then has no row to join, and one deleted after this commits takes these deliveries with it
-- (webhook_endpoints_cascade_deliveries.sql).
CREATE OR REPLACE FUNCTION event_outbox_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH subscribed AS (
    SELECT e.id, e.project_id, e.event_types FROM webhook_endpoints e
    WHERE e.project_id IN (SELECT DISTINCT n.project_id FROM new_events n) AND e.enabled
    FOR KEY SHARE OF e)
  INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT s.id, n.id FROM new_events n
    JOIN subscribed s ON s.project_id = n.project_id
      AND (n.type = ANY (s.event_types) OR '*' = ANY (s.event_types));
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER event_outbox_fan_out AFTER INSERT ON event_outbox
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION event_outbox_fan_out();
