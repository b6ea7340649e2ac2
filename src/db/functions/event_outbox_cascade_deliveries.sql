-- Deleting events deletes their deliveries (and so their attempts), in one statement for all the
-- deleted events: the ON DELETE CASCADE of the key migration 057 dropped. Retention deletes only
-- events that no delivery names (retention/webhooks.ts), so this finds nothing there.
CREATE OR REPLACE FUNCTION event_outbox_cascade_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_deliveries d USING old_rows o WHERE d.event_id = o.id;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER event_outbox_cascade_deliveries AFTER DELETE ON event_outbox
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION event_outbox_cascade_deliveries();
