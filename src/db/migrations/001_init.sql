-- Identity and organizations -------------------------------------------------------------

CREATE TABLE developers (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) <= 254),
  -- "<issuer> <sub>" of the token that first signed in with this email; NULL for a member
  -- invited by email who has not signed in yet.
  subject text UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE organizations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
  slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9-]{3,48}$'),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE org_members (
  org_id bigint NOT NULL REFERENCES organizations (id),
  developer_id bigint NOT NULL REFERENCES developers (id),
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, developer_id)
);
CREATE INDEX org_members_by_developer ON org_members (developer_id);

-- Projects and their policy --------------------------------------------------------------

CREATE TABLE projects (
  id text PRIMARY KEY CHECK (id ~ '^[a-z0-9_-]{3,64}$'),
  org_id bigint NOT NULL REFERENCES organizations (id),
  -- The owner identifier exactly as sent on creation (the organization's id or slug).
  owner text NOT NULL,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
  deposit_address text NOT NULL,
  gas_tank_balance numeric(78, 0) NOT NULL DEFAULT 0 CHECK (gas_tank_balance >= 0),
  daily_cap numeric(78, 0) CHECK (daily_cap >= 0),
  validity_ttl_sec integer NOT NULL DEFAULT 300 CHECK (validity_ttl_sec BETWEEN 30 AND 3600),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projects_by_org ON projects (org_id);

CREATE SEQUENCE funding_derivation_index START WITH 0 MINVALUE 0;

CREATE TABLE funding_accounts (
  project_id text NOT NULL REFERENCES projects (id),
  chain_id integer NOT NULL,
  address text NOT NULL,
  derivation_index integer NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, chain_id),
  UNIQUE (chain_id, address)
);

CREATE TABLE api_keys (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  digest text NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
  key_preview text NOT NULL,
  rate_limit integer NOT NULL CHECK (rate_limit BETWEEN 1 AND 1000000),
  scopes text[] NOT NULL,
  issued_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_keys_by_project ON api_keys (project_id, id);

CREATE TABLE allowlist_entries (
  project_id text NOT NULL REFERENCES projects (id),
  target_contract text NOT NULL CHECK (target_contract ~ '^0x[0-9a-f]{40}$'),
  function_selector text NOT NULL CHECK (function_selector ~ '^0x[0-9a-f]{8}$'),
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, target_contract, function_selector)
);

-- Money ----------------------------------------------------------------------------------

CREATE TABLE ledger_entries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id),
  kind text NOT NULL CHECK (kind IN ('deposit', 'reserve', 'settle', 'release')),
  amount numeric(78, 0) NOT NULL,
  reference text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (kind, reference),
  CHECK ((kind = 'reserve' AND amount <= 0) OR (kind IN ('deposit', 'release') AND amount >= 0) OR kind = 'settle')
);
CREATE INDEX ledger_entries_by_project ON ledger_entries (project_id);

CREATE TABLE sponsorships (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  auth_id text NOT NULL UNIQUE CHECK (auth_id ~ '^0x[0-9a-f]{64}$'),
  project_id text NOT NULL REFERENCES projects (id),
  api_key_id bigint REFERENCES api_keys (id),
  chain_id integer NOT NULL,
  sender text NOT NULL,
  target text NOT NULL,
  selector text NOT NULL,
  estimated_gas bigint NOT NULL CHECK (estimated_gas > 0),
  max_gas_cost numeric(78, 0) NOT NULL CHECK (max_gas_cost >= 0),
  valid_after bigint NOT NULL,
  valid_until bigint NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'success', 'reverted', 'expired')),
  actual_gas bigint NOT NULL DEFAULT 0,
  actual_gas_cost numeric(78, 0) NOT NULL DEFAULT 0 CHECK (actual_gas_cost <= max_gas_cost),
  tx_hash text,
  user_op_hash text,
  client_nonce text,
  request_digest text,
  response text,
  created_at timestamptz NOT NULL DEFAULT now(),
  settled_at timestamptz,
  CHECK (valid_until > valid_after),
  UNIQUE (project_id, client_nonce)
);
CREATE INDEX sponsorships_by_project ON sponsorships (project_id, id DESC);
CREATE INDEX sponsorships_pending ON sponsorships (chain_id, valid_until) WHERE status = 'pending';

-- Spending per project and UTC day, for the daily cap: reservations count at once, and a
-- settlement or release gives back what was not spent.
CREATE TABLE daily_usage (
  project_id text NOT NULL REFERENCES projects (id),
  day date NOT NULL,
  spent numeric(78, 0) NOT NULL DEFAULT 0 CHECK (spent >= 0),
  PRIMARY KEY (project_id, day)
);

-- Where each chain watcher has read up to.
CREATE TABLE chain_cursors (
  chain_id integer NOT NULL,
  watcher text NOT NULL,
  next_block bigint NOT NULL CHECK (next_block >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain_id, watcher)
);
