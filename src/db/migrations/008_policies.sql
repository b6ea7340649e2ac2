-- Sponsorship policies (issue 11): per-project rules enforced inside the reservation, with usage
-- counters that the reservation reads and writes under the project's row lock, so that every cap
-- is exact across concurrent requests and instances.

-- One rule of a project, identified by a client-chosen id (named in refusals). Which columns a
-- kind uses is checked here as well as by the API (src/policies/rules.ts).
CREATE TABLE policy_rules (
  project_id text NOT NULL REFERENCES projects (id),
  id text NOT NULL CHECK (id ~ '^[a-z0-9_-]{1,64}$'),
  kind text NOT NULL CHECK (kind IN ('sender_spend_cap', 'sender_count_cap', 'project_spend_cap',
    'project_count_cap', 'operation_cost_cap', 'campaign', 'sender_allowlist', 'sender_blocklist')),
  max_wei numeric(78, 0) CHECK (max_wei >= 0),
  max_operations bigint CHECK (max_operations >= 0),
  -- The counting window of a cap: a UTC calendar day, ISO week (from Monday) or month; fixed
  -- intervals of window_seconds counted from the Unix epoch; or the rule's whole life.
  window_kind text CHECK (window_kind IN ('day', 'week', 'month', 'interval', 'lifetime')),
  window_seconds integer CHECK (window_seconds BETWEEN 60 AND 31622400),
  starts_at timestamptz,
  ends_at timestamptz,
  senders text[] CHECK (cardinality(senders) <= 1000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  CHECK ((window_kind = 'interval') = (window_seconds IS NOT NULL)),
  CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at),
  CHECK (CASE kind
    WHEN 'sender_spend_cap' THEN max_wei IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'project_spend_cap' THEN max_wei IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'sender_count_cap' THEN max_operations IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'project_count_cap' THEN max_operations IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'operation_cost_cap' THEN max_wei IS NOT NULL
    WHEN 'campaign' THEN starts_at IS NOT NULL OR ends_at IS NOT NULL
    ELSE senders IS NOT NULL
  END)
);

-- What a cap has counted in one window: for one sender, or '*' for the whole project. Both the
-- spend (wei, reservations at maxGasCost less what settlement and release gave back) and the
-- operations are kept whatever the rule's kind. `reached_at` marks the window whose cap was
-- reached, so that `cap.reached` is emitted once per (rule, subject, window).
CREATE TABLE policy_usage (
  project_id text NOT NULL,
  rule_id text NOT NULL,
  subject text NOT NULL,
  window_start timestamptz NOT NULL,
  spent numeric(78, 0) NOT NULL DEFAULT 0 CHECK (spent >= 0),
  ops bigint NOT NULL DEFAULT 0 CHECK (ops >= 0),
  reached_at timestamptz,
  PRIMARY KEY (project_id, rule_id, subject, window_start),
  FOREIGN KEY (project_id, rule_id) REFERENCES policy_rules (project_id, id) ON DELETE CASCADE
);

-- The windows a reservation was counted in ([{rule, subject, window_start}]), so that settlement
-- and release give back into the same windows. NULL when the project had no caps.
ALTER TABLE sponsorships ADD COLUMN policy_usage jsonb;
