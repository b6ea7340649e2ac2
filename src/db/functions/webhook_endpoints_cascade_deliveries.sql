-- Deleting webhook endpoints deletes their deliveries (and so their attempts), in one statement
-- for all the deleted endpoints: the ON DELETE CASCADE of the key migration 057 dropped.
CREATE OR REPLACE FUNCTION webhook_endpoints_cascade_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM webhook_deliveries d USING old_rows o WHERE d.endpoint_id = o.id;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER webhook_endpoints_cascade_deliveries AFTER DELETE ON webhook_endpoints
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_endpoints_cascade_deliveries();
