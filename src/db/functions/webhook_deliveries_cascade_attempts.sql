-- Deleting webhook deliveries (retention, an endpoint's deletion) deletes their attempts, in one
-- statement for all the deleted deliveries: the ON DELETE CASCADE of the key migration 057 dropped.
CREATE OR REPLACE FUNCTION webhook_deliveries_cascade_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_attempts a USING old_rows o WHERE a.delivery_id = o.id;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER webhook_deliveries_cascade_attempts AFTER DELETE ON webhook_deliveries
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_deliveries_cascade_attempts();
