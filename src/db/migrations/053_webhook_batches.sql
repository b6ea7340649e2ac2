-- Batched deliveries (issue 22): an endpoint may take several events in one request. 1, the
-- default, is one event per request as before; up to 100 events per request when the endpoint
-- says so. Nothing else changes: each event keeps its own delivery row, schedule and log, and a
-- request of several events is one attempt of each.
ALTER TABLE webhook_endpoints
  ADD COLUMN max_events_per_request integer NOT NULL DEFAULT 1
    CHECK (max_events_per_request BETWEEN 1 AND 100);
