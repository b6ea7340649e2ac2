-- A checkpoint is a fact about the ledger up to an entry: never changed or removed once written.
CREATE OR REPLACE FUNCTION ledger_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_checkpoints is append-only';
END $$;

CREATE OR REPLACE TRIGGER ledger_checkpoints_no_update BEFORE UPDATE OR DELETE ON ledger_checkpoints
  FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_append_only();
