-- Webhooks (issue 11): a project's event endpoints, its approval webhook and low-balance alert,
-- and the delivery of event_outbox (007) to the endpoints. Written only by src/webhooks/.
--
-- Events are written by triggers on the tables that record the changes, so each one commits in
-- the same transaction as its change whatever code path made it (the reservation function,
-- settlement, releases, deposit credits). A trigger writes an event only when at least one
-- enabled endpoint of the project subscribes to its type: a project without webhooks pays one
-- index probe per statement. Events written with emit_event by other modules (cap.reached) are
-- kept whether or not anyone subscribes. Fan-out to endpoints happens in the same transaction as
-- the event (a trigger on event_outbox), so the delivery worker only ever reads
-- webhook_deliveries and needs no cursor over event ids that commit out of order.

-- The signing secrets are stored as they are: the service has to compute HMACs with them, so a
-- digest cannot do. They leave the database only in the response that created them.
CREATE TABLE webhook_endpoints (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  url text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
  event_types text[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 32),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 256),
  secret text NOT NULL CHECK (secret ~ '^whsec_'),
  -- After a rotation the previous secret keeps signing beside the new one until this time, so
  -- receivers can switch without dropping deliveries.
  previous_secret text CHECK (previous_secret ~ '^whsec_'),
  previous_secret_until timestamptz,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL))
);
CREATE INDEX webhook_endpoints_by_project ON webhook_endpoints (project_id, id);

-- Per-project settings of this module: the low-balance alert and the approval webhook.
CREATE TABLE project_webhook_settings (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  low_balance_threshold numeric(78, 0) CHECK (low_balance_threshold > 0),
  approval_url text CHECK (approval_url ~ '^https?://' AND length(approval_url) <= 2048),
  approval_secret text CHECK (approval_secret ~ '^whsec_'),
  approval_timeout_ms integer NOT NULL DEFAULT 2000 CHECK (approval_timeout_ms BETWEEN 50 AND 5000),
  approval_fail_mode text NOT NULL DEFAULT 'closed' CHECK (approval_fail_mode IN ('open', 'closed')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((approval_url IS NULL) = (approval_secret IS NULL))
);

-- One row per (endpoint, event): the unit of at-least-once delivery. A claimed row's
-- next_attempt_at is pushed past the attempt's timeout (a lease), so a worker that dies mid-attempt
-- leaves the row to be claimed again once the lease runs out.
CREATE TABLE webhook_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id bigint NOT NULL REFERENCES event_outbox (id) ON DELETE CASCADE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_status_code integer,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  UNIQUE (endpoint_id, event_id),
  CHECK ((status = 'pending') = (completed_at IS NULL))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_id);

-- The delivery log: one row per HTTP attempt.
CREATE TABLE webhook_attempts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL CHECK (attempt >= 1),
  started_at timestamptz NOT NULL,
  latency_ms integer NOT NULL CHECK (latency_ms >= 0),
  status_code integer,
  error text CHECK (length(error) <= 500),
  -- When the next attempt is due; NULL when this one succeeded or was the last.
  next_attempt_at timestamptz
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);
