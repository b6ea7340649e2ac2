-- The event outbox (issue 11): every event a project's webhooks report is a row written in the
-- same transaction as the change it reports, so an event exists exactly when its change
-- committed. Delivery (webhooks/) reads it afterwards; a crash between the change and the
-- delivery loses nothing. Append-only apart from delivery bookkeeping elsewhere.
CREATE TABLE event_outbox (
  id bigserial PRIMARY KEY,
  -- The id a receiver de-duplicates on: stable across every redelivery of this event.
  event_id text NOT NULL UNIQUE DEFAULT ('evt_' || md5(random()::text || clock_timestamp()::text)),
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  type text NOT NULL CHECK (type ~ '^[a-z_]+(\.[a-z_]+)*$' AND length(type) <= 64),
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX event_outbox_project ON event_outbox (project_id, id);
