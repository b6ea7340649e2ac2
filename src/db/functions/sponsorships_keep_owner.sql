-- What a sponsorship belongs to never changes (settlement sets its status and costs, never these):
-- its project and key are checked when it is written (sponsorships_check_references.sql, migration
-- 056), and nothing checks them again.
CREATE OR REPLACE FUNCTION sponsorships_keep_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a sponsorship''s project and API key do not change' USING ERRCODE = 'foreign_key_violation';
END $$;

CREATE OR REPLACE TRIGGER sponsorships_owner_kept BEFORE UPDATE OF project_id, api_key_id ON sponsorships
  FOR EACH ROW WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id)
  EXECUTE FUNCTION sponsorships_keep_owner();
