-- A webhook attempt names an existing delivery: checked once per INSERT statement over all its
-- rows (migration 057 says why not per row by a foreign key). The record of attempts writes a
-- batch's attempts in one INSERT (webhook_record_attempts.sql).
CREATE OR REPLACE FUNCTION webhook_attempts_check_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_delivery bigint;
BEGIN
  SELECT n.delivery_id INTO v_delivery
    FROM (SELECT DISTINCT a.delivery_id FROM new_rows a) n
    WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = n.delivery_id)
    LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'a webhook attempt names delivery %, which does not exist', v_delivery
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER webhook_attempts_references AFTER INSERT ON webhook_attempts
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_attempts_check_references();
