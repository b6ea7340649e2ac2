-- Issue 22: every event written paid for an index that nothing reads. event_outbox_project
-- (project_id, id), from migration 007, was made for reading a project's events in order; no
-- statement of the service does (deliveries read events by id, retention by age), and projects
-- are never deleted, so the foreign key's cascade never looks for a project's events either.
-- An authorization of a project that subscribes to sponsorship.sponsored writes one event:
-- one index entry fewer per authorization.
DROP INDEX IF EXISTS event_outbox_project;
