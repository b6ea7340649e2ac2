-- One index fewer on webhook_deliveries (issue 22: the database's work per subscribed event).
-- A delivery's row is inserted with its event, then updated when claimed and when done; neither
-- update can stay HOT (the claim moves next_attempt_at, which two indexes hold; completion
-- changes the status, which two partial indexes test), so each event wrote an entry into each of
-- the table's seven indexes three times. The unique key was (endpoint_id, event_id) and a second
-- index (event_id) served the event's side (the foreign key's cascade, the retention job's "no
-- delivery left" test). The key is now (event_id, endpoint_id), which serves both, and the
-- second index goes.
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_endpoint UNIQUE (event_id, endpoint_id);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_event_id_key;
DROP INDEX webhook_deliveries_by_event;
