-- sponsorship.sponsored events leave the reservation's transaction (issue 22).
--
-- A reservation holds its project's row lock from its first statement to its commit, and every
-- reservation of the project waits for it: the reservations of a project follow one another. With
-- an endpoint subscribed, the statement-level trigger on sponsorships wrote the batch's events
-- (their JSON, the outbox rows, the fan-out's delivery rows) inside that window: about 3 ms more
-- per batch of 25 under `npm run bench`, where the whole call took 4.5 without events. After this
-- change the call takes 5.1 ms with events; the bench's rate did not follow on its 2-core machine,
-- where the service's own wait on the cores it shares with PostgreSQL sets it (README, Performance).
--
-- The events are now written after the reservation commits, by a relay (db/functions/
-- relay_sponsored_events.sql, run by every instance's webhook worker): a cursor per subscribed
-- project over sponsorships.seq. The sequence is handed out under the project's row lock and
-- committed in its order, so once a number is visible every number below it is too: the relay
-- reads a project's new sponsorships by (project, seq) and writes their events in the transaction
-- that moves the cursor on, each exactly once, with any number of instances (a cursor is taken
-- with SKIP LOCKED).
--
-- A cursor exists from the moment a project first has an endpoint for sponsorship.sponsored (or
-- '*'), starting at the project's last sequence number then: the sponsorships made before that
-- get no event, as before. While no endpoint subscribes, the relay moves the cursor on without
-- writing anything.
CREATE TABLE sponsored_event_cursors (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  -- The last sponsorships.seq of the project that the relay has passed.
  last_seq bigint NOT NULL CHECK (last_seq >= 0)
);

INSERT INTO sponsored_event_cursors (project_id, last_seq)
  SELECT p.id, p.sponsorships_seq FROM projects p
  WHERE EXISTS (SELECT 1 FROM webhook_endpoints e
                WHERE e.project_id = p.id AND e.enabled
                  AND ('sponsorship.sponsored' = ANY (e.event_types) OR '*' = ANY (e.event_types)));

-- The relay's events would otherwise wait for reservations all the same: the outbox's foreign key
-- to projects checks each event's project with FOR KEY SHARE, which waits for a reservation's
-- FOR UPDATE of the project's row, and a reservation waits in turn for the relay's commit. Under
-- the bench that check took 74 µs per authorization, against 8 while the events were written
-- inside the reservation. Projects are never deleted (migration 042), and every event's project is
-- that of a row whose own foreign key was checked (a sponsorship, a ledger entry, a policy rule) or
-- a project the caller has just read: the key goes, and with it a lookup per event.
ALTER TABLE event_outbox DROP CONSTRAINT event_outbox_project_id_fkey;

DROP TRIGGER IF EXISTS sponsorships_sponsored_event ON sponsorships;
DROP FUNCTION IF EXISTS sponsorships_emit_sponsored();
-- Its file is gone; the record that it was applied goes too (a fresh store has no such table yet).
DO $$
BEGIN
  IF to_regclass('schema_functions') IS NOT NULL THEN
    DELETE FROM schema_functions WHERE name = 'sponsorships_emit_sponsored.sql';
  END IF;
END $$;
