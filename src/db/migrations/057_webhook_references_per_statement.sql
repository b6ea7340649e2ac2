-- Issue 22: the foreign keys of webhook deliveries and attempts, checked and cascaded once per
-- statement instead of once per row, as migration 056 did for sponsorships and ledger entries.
--
-- Every event a project subscribes to is written with a delivery per endpoint (the outbox's
-- fan-out), and every attempt to send it with an attempt row: three row-level foreign-key checks
-- per event delivered at the first try (the delivery's endpoint and event, the attempt's
-- delivery), each an AFTER trigger event of its own that runs a query and takes a KEY SHARE lock
-- on the parent's row. Counted by callgrind (`npm run bench:instructions`: PostgreSQL 15 in
-- single-user mode, 25 events a statement to one endpoint, on a store that has delivered 50,000):
-- writing an event and its delivery took 328,768 instructions with the keys and takes 285,007 with
-- the checks below; recording its first attempt 287,170 and 219,707: 18 % less per event
-- delivered at the first try (bench/results-2026-12-02-references.txt).
--
-- What the keys did is done per statement (db/functions/webhook_deliveries_check_references.sql,
-- webhook_attempts_check_references.sql): after each INSERT, one query looks up the statement's
-- distinct endpoints, events or deliveries, and a row naming a missing one fails the statement
-- with foreign_key_violation (23503). Their ON DELETE CASCADE is done per statement too
-- (webhook_endpoints_cascade_deliveries.sql, webhook_deliveries_cascade_attempts.sql,
-- event_outbox_cascade_deliveries.sql): deleting endpoints, deliveries or events deletes what
-- names them in one statement, not one per deleted row. The fan-out takes the KEY SHARE lock the
-- delivery's key took, once per endpoint rather than once per delivery (event_outbox_fan_out.sql),
-- so an endpoint deleted meanwhile waits for the new deliveries and then deletes them with it.
-- The record of attempts logs an attempt only while its delivery exists (an endpoint deleted
-- while its deliveries were in flight): with the key, such an attempt failed the whole record.
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_endpoint_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_event_id_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT IF EXISTS webhook_attempts_delivery_id_fkey;
