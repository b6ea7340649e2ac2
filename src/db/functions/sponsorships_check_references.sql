-- A sponsorship names an existing project and, when it has one, an API key of that project:
-- checked once per INSERT statement over all its rows (migration 056 says why not per row by a
-- foreign key). The reservation's batch is one statement, so one query checks it whole.
CREATE OR REPLACE FUNCTION sponsorships_check_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_project text;
  v_key bigint;
BEGIN
  SELECT n.project_id, n.api_key_id INTO v_project, v_key
    FROM (SELECT DISTINCT s.project_id, s.api_key_id FROM new_rows s) n
    WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = n.project_id)
       OR (n.api_key_id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = n.api_key_id AND k.project_id = n.project_id))
    LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'a sponsorship names project % and API key %, and there is no such key of that project (or no such project)',
      v_project, COALESCE(v_key::text, 'none')
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_references AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorships_check_references();
