-- Reads that stay fast at ten million operations (issue 12): rollups of sponsorships, indexes
-- for the events' filters and cursor, ledger checkpoints, and an index for the retention job.
--
-- The rollups are kept by statement-level triggers with transition tables, in the same
-- transaction as the reservation, settlement, release or reversal that changes a sponsorship:
-- the reservation and settlement code is not touched, and a statement that changes many rows
-- costs one aggregate upsert per rollup table, not one per row. Each trigger adds what the new
-- rows contribute and takes away what the old rows contributed, so whatever the transition the
-- rollups equal a full recomputation (test/rollups.test.ts checks it on random histories).
-- "Settled" is status success or reverted, dated by settled_at, as the overview counts it.

-- No sponsorship or ledger entry may be written while the backfill below reads them (and any
-- that is being written is waited for), so the rollups and checkpoints start out exact.
LOCK TABLE sponsorships IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE ledger_entries IN SHARE ROW EXCLUSIVE MODE;

-- One row per project: authorizations in each status (the events' `total`), and the settled
-- totals of the overview. The counters carry no CHECK (>= 0): an upsert's proposed row holds the
-- signed delta and is checked before the conflict turns it into an update.
CREATE TABLE rollup_project_totals (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  pending bigint NOT NULL DEFAULT 0,
  success bigint NOT NULL DEFAULT 0,
  reverted bigint NOT NULL DEFAULT 0,
  expired bigint NOT NULL DEFAULT 0,
  -- Over settled operations.
  gas_used numeric(78, 0) NOT NULL DEFAULT 0,
  cost_wei numeric(78, 0) NOT NULL DEFAULT 0
);

-- Per project and UTC day. `authorized` counts reservations by the day they were made
-- (created_at); the other columns count operations in their current state by the day they
-- reached it (settled_at), gas and cost over settled operations.
CREATE TABLE rollup_project_days (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  day date NOT NULL,
  authorized bigint NOT NULL DEFAULT 0,
  success bigint NOT NULL DEFAULT 0,
  reverted bigint NOT NULL DEFAULT 0,
  expired bigint NOT NULL DEFAULT 0,
  gas_used numeric(78, 0) NOT NULL DEFAULT 0,
  cost_wei numeric(78, 0) NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, day)
);

-- Settled calls per (project, target): the overview's topContracts.
CREATE TABLE rollup_project_targets (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  target text NOT NULL,
  calls bigint NOT NULL DEFAULT 0,
  gas_used numeric(78, 0) NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, target)
);
CREATE INDEX rollup_project_targets_top ON rollup_project_targets (project_id, calls DESC, target);

-- Exact active senders: per (project, sender) the latest settled_at of the sender's settled
-- operations. A count over any trailing window (activeUsers: 30 days) is an index range scan
-- over the senders active in that window, exact to the microsecond, whatever the history.
CREATE TABLE rollup_project_senders (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  sender text NOT NULL,
  last_settled_at timestamptz NOT NULL,
  PRIMARY KEY (project_id, sender)
);
CREATE INDEX rollup_project_senders_recent ON rollup_project_senders (project_id, last_settled_at);

-- What a changed sponsorship row contributes, signed: +1 for a row as it is now, -1 for the
-- row as it was.
CREATE TYPE rollup_delta AS (
  sign integer,
  project_id text,
  status text,
  created_at timestamptz,
  settled_at timestamptz,
  sender text,
  target text,
  actual_gas bigint,
  actual_gas_cost numeric
);

-- Indexes: the sender index serves the events' sender filter and the senders' refresh above;
-- the target and status ones the events' filters. Each reads newest first by id, the cursor.
-- Settled successes are most rows, so a `success` filter reads sponsorships_by_project and
-- skips the few others; pending rows are the newest, found at the top of the same index. The
-- status index holds only reverted and expired rows: a reservation never writes to it.
CREATE INDEX sponsorships_by_sender ON sponsorships (project_id, sender, id DESC);
CREATE INDEX sponsorships_by_target ON sponsorships (project_id, target, id DESC);
CREATE INDEX sponsorships_by_status ON sponsorships (project_id, status, id DESC) WHERE status IN ('reverted', 'expired');
-- The retention job's work list: only rows still holding a replay (24 hours' worth) are in it.
CREATE INDEX sponsorships_replay_kept ON sponsorships (created_at)
  WHERE response IS NOT NULL OR request_digest IS NOT NULL OR client_nonce IS NOT NULL;

-- BEGIN BACKFILL (test/rollups.test.ts runs this part again)
-- Backfill from the rows already there: the same sums as the triggers keep, by aggregates (an
-- upgraded database may hold millions of rows; the triggers' array would hold them all in memory).
INSERT INTO rollup_project_totals (project_id, pending, success, reverted, expired, gas_used, cost_wei)
  SELECT project_id,
    count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'success'),
    count(*) FILTER (WHERE status = 'reverted'), count(*) FILTER (WHERE status = 'expired'),
    COALESCE(sum(actual_gas) FILTER (WHERE status IN ('success', 'reverted')), 0),
    COALESCE(sum(actual_gas_cost) FILTER (WHERE status IN ('success', 'reverted')), 0)
  FROM sponsorships GROUP BY project_id;
INSERT INTO rollup_project_days (project_id, day, authorized, success, reverted, expired, gas_used, cost_wei)
  SELECT project_id, day, sum(a), sum(s), sum(r), sum(e), sum(g), sum(c) FROM (
    SELECT project_id, (created_at AT TIME ZONE 'UTC')::date AS day, 1 AS a, 0 AS s, 0 AS r, 0 AS e,
      0::numeric AS g, 0::numeric AS c
    FROM sponsorships
    UNION ALL
    SELECT project_id, (settled_at AT TIME ZONE 'UTC')::date, 0, (status = 'success')::int,
      (status = 'reverted')::int, (status = 'expired')::int,
      CASE WHEN status IN ('success', 'reverted') THEN actual_gas ELSE 0 END,
      CASE WHEN status IN ('success', 'reverted') THEN actual_gas_cost ELSE 0 END
    FROM sponsorships WHERE status <> 'pending' AND settled_at IS NOT NULL) x
  GROUP BY project_id, day;
INSERT INTO rollup_project_targets (project_id, target, calls, gas_used)
  SELECT project_id, target, count(*), sum(actual_gas) FROM sponsorships
  WHERE status IN ('success', 'reverted') GROUP BY project_id, target;
INSERT INTO rollup_project_senders (project_id, sender, last_settled_at)
  SELECT project_id, sender, max(settled_at) FROM sponsorships
  WHERE status IN ('success', 'reverted') AND settled_at IS NOT NULL GROUP BY project_id, sender;
-- END BACKFILL

-- Ledger checkpoints ---------------------------------------------------------------------------

-- A project's entries in id order, with their amounts: a checkpoint's tail is an index-only
-- range scan. Replaces the plain (project_id) index, which it covers.
CREATE INDEX ledger_entries_by_project_id ON ledger_entries (project_id, id) INCLUDE (amount);
DROP INDEX ledger_entries_by_project;

-- `balance` is the sum of the project's entries with id <= last_entry_id (`entries` of them),
-- checked against the cached balance when written (ledger/checkpoints.ts). Parity is then the
-- latest checkpoint plus the entries after it. Append-only, like the ledger.
CREATE TABLE ledger_checkpoints (
  project_id text NOT NULL REFERENCES projects (id),
  last_entry_id bigint NOT NULL CHECK (last_entry_id >= 0),
  balance numeric(78, 0) NOT NULL,
  entries bigint NOT NULL CHECK (entries >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, last_entry_id)
);

-- A first checkpoint for every project whose cache agrees with its ledger now (a drifting
-- project gets none, and its parity keeps reading the whole ledger until it is repaired).
INSERT INTO ledger_checkpoints (project_id, last_entry_id, balance, entries)
  SELECT l.project_id, max(l.id), sum(l.amount), count(*)
  FROM ledger_entries l JOIN projects p ON p.id = l.project_id
  GROUP BY l.project_id, p.gas_tank_balance
  HAVING sum(l.amount) = p.gas_tank_balance;
