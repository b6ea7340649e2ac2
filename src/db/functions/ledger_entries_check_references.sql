-- A ledger entry names an existing project: checked once per INSERT statement over all its rows
-- (migration 056 says why not per row by a foreign key). ledger_move.sql writes a batch's entries
-- in one statement. Entries are never updated (ledger_entries_append_only.sql).
CREATE OR REPLACE FUNCTION ledger_entries_check_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_project text;
BEGIN
  SELECT n.project_id INTO v_project
    FROM (SELECT DISTINCT e.project_id FROM new_rows e) n
    WHERE NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = n.project_id)
    LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'a ledger entry names project %, which does not exist', v_project
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER ledger_entries_references AFTER INSERT ON ledger_entries
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_check_references();
