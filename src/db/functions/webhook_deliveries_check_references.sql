-- A webhook delivery names an existing endpoint and event: checked once per INSERT statement over
-- all its rows (migration 057 says why not per row by foreign keys). The outbox's fan-out writes a
-- statement's deliveries in one INSERT (event_outbox_fan_out.sql).
CREATE OR REPLACE FUNCTION webhook_deliveries_check_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_missing text;
BEGIN
  SELECT 'endpoint ' || n.endpoint_id INTO v_missing
    FROM (SELECT DISTINCT d.endpoint_id FROM new_rows d) n
    WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = n.endpoint_id)
    LIMIT 1;
  IF NOT FOUND THEN
    SELECT 'event ' || n.event_id INTO v_missing
      FROM (SELECT DISTINCT d.event_id FROM new_rows d) n
      WHERE NOT EXISTS (SELECT 1 FROM event_outbox ev WHERE ev.id = n.event_id)
      LIMIT 1;
  END IF;
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'a webhook delivery names %, which does not exist', v_missing
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER webhook_deliveries_references AFTER INSERT ON webhook_deliveries
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_check_references();
