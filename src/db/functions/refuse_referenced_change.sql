-- Projects and API keys are never deleted, and their ids never change: sponsorships and ledger
-- entries name them without a foreign key (migration 056), so the database refuses what the keys'
-- parent side used to refuse for referenced rows, for every row. A key is revoked (revoked_at),
-- never deleted; no statement of the service deletes a project.
CREATE OR REPLACE FUNCTION refuse_referenced_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% rows are never deleted and keep their ids: sponsorships and ledger entries name them', TG_TABLE_NAME
    USING ERRCODE = 'foreign_key_violation';
END $$;

CREATE OR REPLACE TRIGGER projects_kept BEFORE DELETE ON projects
  FOR EACH ROW EXECUTE FUNCTION refuse_referenced_change();
CREATE OR REPLACE TRIGGER projects_id_kept BEFORE UPDATE OF id ON projects
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION refuse_referenced_change();
CREATE OR REPLACE TRIGGER api_keys_kept BEFORE DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION refuse_referenced_change();
CREATE OR REPLACE TRIGGER api_keys_id_kept BEFORE UPDATE OF id ON api_keys
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION refuse_referenced_change();
