-- A cursor for each project from the moment an enabled endpoint of it subscribes to
-- sponsorship.sponsored, at the project's last sequence number then; an existing one stays where
-- it is (the relay moves it on while nobody subscribes).
CREATE OR REPLACE FUNCTION webhook_endpoints_sponsored_cursor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sponsored_event_cursors (project_id, last_seq)
    SELECT p.id, p.sponsorships_seq FROM projects p
    WHERE p.id IN (SELECT n.project_id FROM new_rows n
                   WHERE n.enabled AND ('sponsorship.sponsored' = ANY (n.event_types) OR '*' = ANY (n.event_types)))
    ORDER BY p.id
  ON CONFLICT (project_id) DO NOTHING;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER webhook_endpoints_sponsored_cursor_insert AFTER INSERT ON webhook_endpoints
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_endpoints_sponsored_cursor();
CREATE OR REPLACE TRIGGER webhook_endpoints_sponsored_cursor_update AFTER UPDATE ON webhook_endpoints
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_endpoints_sponsored_cursor();
