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

CREATE FUNCTION rollup_apply(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- Rollup rows are locked after the project's row, as every writer of a project does: a
  -- reservation locks the project first, and a settlement would otherwise lock the totals
  -- (through this trigger) before its ledger entry locks the project, and the two could
  -- deadlock. The reservation already holds a stronger lock, so this costs it nothing.
  PERFORM 1 FROM projects WHERE id IN (SELECT DISTINCT d.project_id FROM unnest(p_rows) d)
    ORDER BY id FOR NO KEY UPDATE;
  INSERT INTO rollup_project_totals AS t (project_id, pending, success, reverted, expired, gas_used, cost_wei)
    SELECT d.project_id,
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'pending'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'success'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'reverted'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'expired'), 0),
      COALESCE(sum(d.sign * d.actual_gas) FILTER (WHERE d.status IN ('success', 'reverted')), 0),
      COALESCE(sum(d.sign * d.actual_gas_cost) FILTER (WHERE d.status IN ('success', 'reverted')), 0)
    FROM unnest(p_rows) d GROUP BY d.project_id ORDER BY d.project_id
  ON CONFLICT (project_id) DO UPDATE SET
    pending = t.pending + EXCLUDED.pending,
    success = t.success + EXCLUDED.success,
    reverted = t.reverted + EXCLUDED.reverted,
    expired = t.expired + EXCLUDED.expired,
    gas_used = t.gas_used + EXCLUDED.gas_used,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  -- A row counts on two days: the day it was authorized, and the day it reached its state.
  INSERT INTO rollup_project_days AS t (project_id, day, authorized, success, reverted, expired, gas_used, cost_wei)
    SELECT x.project_id, x.day, sum(x.authorized), sum(x.success), sum(x.reverted), sum(x.expired),
      sum(x.gas_used), sum(x.cost_wei)
    FROM (
      SELECT d.project_id, (d.created_at AT TIME ZONE 'UTC')::date AS day, d.sign::bigint AS authorized,
        0::bigint AS success, 0::bigint AS reverted, 0::bigint AS expired, 0::numeric AS gas_used, 0::numeric AS cost_wei
      FROM unnest(p_rows) d
      UNION ALL
      SELECT d.project_id, (d.settled_at AT TIME ZONE 'UTC')::date,
        0, (d.sign * (d.status = 'success')::int)::bigint, (d.sign * (d.status = 'reverted')::int)::bigint,
        (d.sign * (d.status = 'expired')::int)::bigint,
        CASE WHEN d.status IN ('success', 'reverted') THEN d.sign * d.actual_gas ELSE 0 END,
        CASE WHEN d.status IN ('success', 'reverted') THEN d.sign * d.actual_gas_cost ELSE 0 END
      FROM unnest(p_rows) d WHERE d.status <> 'pending' AND d.settled_at IS NOT NULL
    ) x
    GROUP BY x.project_id, x.day
    HAVING sum(x.authorized) <> 0 OR sum(x.success) <> 0 OR sum(x.reverted) <> 0 OR sum(x.expired) <> 0
      OR sum(x.gas_used) <> 0 OR sum(x.cost_wei) <> 0
    ORDER BY x.project_id, x.day
  ON CONFLICT (project_id, day) DO UPDATE SET
    authorized = t.authorized + EXCLUDED.authorized,
    success = t.success + EXCLUDED.success,
    reverted = t.reverted + EXCLUDED.reverted,
    expired = t.expired + EXCLUDED.expired,
    gas_used = t.gas_used + EXCLUDED.gas_used,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  INSERT INTO rollup_project_targets AS t (project_id, target, calls, gas_used)
    SELECT d.project_id, d.target, sum(d.sign), sum(d.sign * d.actual_gas)
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')
    GROUP BY d.project_id, d.target
    HAVING sum(d.sign) <> 0 OR sum(d.sign * d.actual_gas) <> 0
    ORDER BY d.project_id, d.target
  ON CONFLICT (project_id, target) DO UPDATE SET
    calls = t.calls + EXCLUDED.calls,
    gas_used = t.gas_used + EXCLUDED.gas_used;

  -- Senders: a new settled operation can only move the latest date forward; one that stops
  -- counting (a reorganisation reversed it) makes the sender's latest date be read again from
  -- its own operations (sponsorships_by_sender), which is rare and bounded by that sender.
  INSERT INTO rollup_project_senders AS t (project_id, sender, last_settled_at)
    SELECT d.project_id, d.sender, max(d.settled_at)
    FROM unnest(p_rows) d WHERE d.sign > 0 AND d.status IN ('success', 'reverted') AND d.settled_at IS NOT NULL
    GROUP BY d.project_id, d.sender ORDER BY d.project_id, d.sender
  ON CONFLICT (project_id, sender) DO UPDATE SET
    last_settled_at = GREATEST(t.last_settled_at, EXCLUDED.last_settled_at);
  IF EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.sign < 0 AND d.status IN ('success', 'reverted')) THEN
    PERFORM rollup_refresh_senders(p_rows);
  END IF;
END $$;

CREATE FUNCTION rollup_refresh_senders(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH touched AS (
    SELECT DISTINCT d.project_id, d.sender FROM unnest(p_rows) d
    WHERE d.sign < 0 AND d.status IN ('success', 'reverted')
  ), latest AS (
    SELECT t.project_id, t.sender,
      (SELECT max(s.settled_at) FROM sponsorships s
        WHERE s.project_id = t.project_id AND s.sender = t.sender AND s.status IN ('success', 'reverted')) AS at
    FROM touched t
  ), gone AS (
    DELETE FROM rollup_project_senders r USING latest l
    WHERE l.at IS NULL AND r.project_id = l.project_id AND r.sender = l.sender
  )
  UPDATE rollup_project_senders r SET last_settled_at = l.at FROM latest l
  WHERE l.at IS NOT NULL AND r.project_id = l.project_id AND r.sender = l.sender;
END $$;

-- A reservation inserts pending rows, which count in two places only: the totals' pending and
-- the day's authorized. That common case takes two upserts and nothing else (it runs once per
-- reservation, on authorize's path); anything else takes the general path. The project's row is
-- already locked by the reservation, which takes it first.
CREATE FUNCTION rollup_sponsorships_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'pending') THEN
    INSERT INTO rollup_project_totals AS t (project_id, pending)
      SELECT project_id, count(*) FROM new_rows GROUP BY project_id ORDER BY project_id
    ON CONFLICT (project_id) DO UPDATE SET pending = t.pending + EXCLUDED.pending;
    INSERT INTO rollup_project_days AS t (project_id, day, authorized)
      SELECT project_id, (created_at AT TIME ZONE 'UTC')::date, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (project_id, day) DO UPDATE SET authorized = t.authorized + EXCLUDED.authorized;
    RETURN NULL;
  END IF;
  PERFORM rollup_apply(ARRAY(SELECT ROW(1, n.project_id, n.status, n.created_at, n.settled_at, n.sender,
      n.target, n.actual_gas, n.actual_gas_cost)::rollup_delta FROM new_rows n));
  RETURN NULL;
END $$;

CREATE FUNCTION rollup_sponsorships_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM rollup_apply(ARRAY(SELECT ROW(-1, o.project_id, o.status, o.created_at, o.settled_at, o.sender,
      o.target, o.actual_gas, o.actual_gas_cost)::rollup_delta FROM old_rows o));
  RETURN NULL;
END $$;

-- Only rows whose contribution changed take part: the retention job and the reservation's
-- forgetting of old nonces change other columns, and cost one empty comparison.
CREATE FUNCTION rollup_sponsorships_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_rows rollup_delta[];
BEGIN
  v_rows := ARRAY(
    SELECT x FROM old_rows o JOIN new_rows n ON n.id = o.id,
      LATERAL (VALUES
        (ROW(-1, o.project_id, o.status, o.created_at, o.settled_at, o.sender, o.target, o.actual_gas,
          o.actual_gas_cost)::rollup_delta),
        (ROW(1, n.project_id, n.status, n.created_at, n.settled_at, n.sender, n.target, n.actual_gas,
          n.actual_gas_cost)::rollup_delta)) AS v(x)
    WHERE (o.project_id, o.status, o.created_at, o.settled_at, o.sender, o.target, o.actual_gas, o.actual_gas_cost)
      IS DISTINCT FROM
      (n.project_id, n.status, n.created_at, n.settled_at, n.sender, n.target, n.actual_gas, n.actual_gas_cost));
  IF cardinality(v_rows) > 0 THEN
    PERFORM rollup_apply(v_rows);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER sponsorships_rollup_insert AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_insert();
CREATE TRIGGER sponsorships_rollup_update AFTER UPDATE ON sponsorships
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_update();
CREATE TRIGGER sponsorships_rollup_delete AFTER DELETE ON sponsorships
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_delete();

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

CREATE FUNCTION ledger_checkpoints_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_checkpoints is append-only';
END $$;
CREATE TRIGGER ledger_checkpoints_no_update BEFORE UPDATE OR DELETE ON ledger_checkpoints
  FOR EACH ROW EXECUTE FUNCTION ledger_checkpoints_append_only();

-- A first checkpoint for every project whose cache agrees with its ledger now (a drifting
-- project gets none, and its parity keeps reading the whole ledger until it is repaired).
INSERT INTO ledger_checkpoints (project_id, last_entry_id, balance, entries)
  SELECT l.project_id, max(l.id), sum(l.amount), count(*)
  FROM ledger_entries l JOIN projects p ON p.id = l.project_id
  GROUP BY l.project_id, p.gas_tank_balance
  HAVING sum(l.amount) = p.gas_tank_balance;
