-- Refused sponsorship requests (src/refusals): what a studio reads to answer "why are my players
-- not sponsored?". Refusals are the path an attacker holding a project's key can drive at high
-- rate, so nothing here is written per request: each instance buffers refusals in memory and
-- writes them in one statement per batch (about once a second).

-- Exact counts per project, UTC day, chain and stable refusal code: one upsert per key and batch.
-- chain_id is 0 when the request named no chain the service could read (a body refused before it
-- was parsed, a 429 answered before the body was read).
CREATE TABLE refusal_days (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  day date NOT NULL,
  chain_id bigint NOT NULL CHECK (chain_id >= 0),
  code text NOT NULL,
  refused bigint NOT NULL CHECK (refused > 0),
  PRIMARY KEY (project_id, day, chain_id, code)
);

-- A bounded sample of refusals with what was asked: at most REFUSAL_DETAIL_PER_MINUTE per
-- project and minute per instance; the rest are only counted above. Removed after
-- REFUSAL_RETENTION_DAYS by the upkeep job (src/retention/refusals.ts).
CREATE TABLE refusals (
  id bigserial PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  code text NOT NULL,
  -- The HTTP status answered; /rpc answers its refusals with HTTP 200 and a JSON-RPC error code.
  status integer NOT NULL CHECK (status BETWEEN 100 AND 599),
  rpc_code integer,
  route text NOT NULL,
  api_key_id bigint,
  sender text,
  target text,
  selector text,
  chain_id bigint,
  estimated_gas numeric(78, 0),
  rule_id text,
  request_id text
);

-- The list reads one project's newest rows first, by time, with the id as the cursor's tiebreak.
CREATE INDEX refusals_by_project ON refusals (project_id, created_at DESC, id DESC);
-- Retention walks the oldest rows of every project.
CREATE INDEX refusals_created ON refusals (created_at);
