-- The per-project sequence number of a sponsorship written without one (tests, the scale bench's
-- bulk seeding); the reservation assigns its own under the project's row lock.
CREATE OR REPLACE FUNCTION sponsorships_assign_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE projects SET sponsorships_seq = sponsorships_seq + 1 WHERE id = NEW.project_id
    RETURNING sponsorships_seq INTO NEW.seq;
  RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_seq BEFORE INSERT ON sponsorships
  FOR EACH ROW WHEN (NEW.seq IS NULL) EXECUTE FUNCTION sponsorships_assign_seq();
