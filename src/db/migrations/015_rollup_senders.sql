-- Active senders as a bounded read, and a rollup per sender (issue 12).
--
-- Migration 012 kept, per (project, sender), the latest settled time, and counted the overview's
-- activeUsers as an index range over the senders active in 30 days: at 10 million operations and
-- 50,000 senders that range took 120 ms. This migration adds, each kept by the same statement-level
-- triggers in the same transaction as the change:
--   * per project and UTC day, `latest_senders`: how many senders' latest settled operation falls
--     on that day. Senders active since an instant are then the sum over the day rows after that
--     instant's day, plus an index range over the senders whose latest operation falls in the
--     rest of that one day (exact to the microsecond: a sender counts once, on its latest day);
--   * per project and UTC day, `active_senders`: the distinct senders with a settled operation
--     that day (exact daily actives, from rollup_project_sender_days below);
--   * per (project, day, sender) the settled operations that day, which keeps `active_senders`
--     exact through reversals: a sender stops counting on a day when its count there reaches 0;
--   * per (project, sender) the settled operations and their actual cost, indexed for the top
--     senders, with an index of pending rows per sender for their pending count.
-- An exact scheme rather than a sketch: it costs one row per sender and one per active sender
-- and day (README, Scale), and answers exact figures that a game can reconcile with its own.

LOCK TABLE sponsorships IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE rollup_project_days
  ADD COLUMN active_senders bigint NOT NULL DEFAULT 0,
  ADD COLUMN latest_senders bigint NOT NULL DEFAULT 0;

ALTER TABLE rollup_project_senders
  ADD COLUMN operations bigint NOT NULL DEFAULT 0,
  ADD COLUMN cost_wei numeric(78, 0) NOT NULL DEFAULT 0;
CREATE INDEX rollup_project_senders_by_operations
  ON rollup_project_senders (project_id, operations DESC, cost_wei DESC, sender);
CREATE INDEX rollup_project_senders_by_cost
  ON rollup_project_senders (project_id, cost_wei DESC, operations DESC, sender);

CREATE TABLE rollup_project_sender_days (
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  day date NOT NULL,
  sender text NOT NULL,
  operations bigint NOT NULL,
  PRIMARY KEY (project_id, day, sender)
);

-- Pending authorizations of one sender (the top senders' `pending`): few rows, the in-flight ones.
CREATE INDEX sponsorships_pending_by_sender ON sponsorships (project_id, sender) WHERE status = 'pending';

-- A sender's latest settled time, before a change.
CREATE TYPE rollup_sender_latest AS (project_id text, sender text, at timestamptz);

CREATE FUNCTION rollup_apply_senders(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_before rollup_sender_latest[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')) THEN
    RETURN;
  END IF;
  -- The caller holds every touched project's row lock, so nothing moves these rows meanwhile.
  v_before := ARRAY(
    SELECT ROW(r.project_id, r.sender, r.last_settled_at)::rollup_sender_latest
    FROM rollup_project_senders r
    WHERE (r.project_id, r.sender) IN (
      SELECT d.project_id, d.sender FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')));

  -- Per sender: settled operations, their cost, and the latest settled time, which a new settled
  -- operation can only move forward. A sender that only lost operations gets its latest time
  -- read again below.
  INSERT INTO rollup_project_senders AS t (project_id, sender, last_settled_at, operations, cost_wei)
    SELECT d.project_id, d.sender, COALESCE(max(d.settled_at) FILTER (WHERE d.sign > 0), '-infinity'),
      sum(d.sign), sum(d.sign * d.actual_gas_cost)
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')
    GROUP BY d.project_id, d.sender ORDER BY d.project_id, d.sender
  ON CONFLICT (project_id, sender) DO UPDATE SET
    last_settled_at = GREATEST(t.last_settled_at, EXCLUDED.last_settled_at),
    operations = t.operations + EXCLUDED.operations,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  -- Per sender and day; a day's distinct senders change when a sender's count there leaves or
  -- reaches 0.
  WITH d AS (
    SELECT d.project_id, (d.settled_at AT TIME ZONE 'UTC')::date AS day, d.sender, sum(d.sign)::bigint AS n
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted') AND d.settled_at IS NOT NULL
    GROUP BY 1, 2, 3 HAVING sum(d.sign) <> 0
  ), u AS (
    INSERT INTO rollup_project_sender_days AS t (project_id, day, sender, operations)
      SELECT project_id, day, sender, n FROM d ORDER BY project_id, day, sender
    ON CONFLICT (project_id, day, sender) DO UPDATE SET operations = t.operations + EXCLUDED.operations
    RETURNING t.project_id, t.day, t.sender, t.operations
  )
  INSERT INTO rollup_project_days AS t (project_id, day, active_senders)
    SELECT u.project_id, u.day, sum((u.operations > 0)::int - (u.operations - d.n > 0)::int)
    FROM u JOIN d ON d.project_id = u.project_id AND d.day = u.day AND d.sender = u.sender
    GROUP BY u.project_id, u.day
    HAVING sum((u.operations > 0)::int - (u.operations - d.n > 0)::int) <> 0
    ORDER BY u.project_id, u.day
  ON CONFLICT (project_id, day) DO UPDATE SET active_senders = t.active_senders + EXCLUDED.active_senders;

  -- A reversal: the touched senders' latest times are read again from their own operations
  -- (rare, and bounded by those senders), and emptied rows go.
  IF EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.sign < 0 AND d.status IN ('success', 'reverted')) THEN
    PERFORM rollup_refresh_senders(p_rows);
    DELETE FROM rollup_project_sender_days r
    WHERE r.operations = 0 AND (r.project_id, r.sender) IN (
      SELECT d.project_id, d.sender FROM unnest(p_rows) d WHERE d.sign < 0 AND d.status IN ('success', 'reverted'));
  END IF;

  -- Each touched sender leaves the day of its latest settled operation before, and joins the one
  -- after (the same day when nothing moved, which cancels out).
  INSERT INTO rollup_project_days AS t (project_id, day, latest_senders)
    SELECT m.project_id, m.day, sum(m.n) FROM (
      SELECT b.project_id, (b.at AT TIME ZONE 'UTC')::date AS day, -1 AS n FROM unnest(v_before) b
      UNION ALL
      SELECT r.project_id, (r.last_settled_at AT TIME ZONE 'UTC')::date, 1
      FROM rollup_project_senders r
      WHERE (r.project_id, r.sender) IN (
        SELECT d.project_id, d.sender FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted'))
    ) m
    GROUP BY m.project_id, m.day HAVING sum(m.n) <> 0 ORDER BY m.project_id, m.day
  ON CONFLICT (project_id, day) DO UPDATE SET latest_senders = t.latest_senders + EXCLUDED.latest_senders;
END $$;

-- As in 012, with the senders' part moved to rollup_apply_senders.
CREATE OR REPLACE FUNCTION rollup_apply(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
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

  PERFORM rollup_apply_senders(p_rows);
END $$;

-- BEGIN BACKFILL (test/rollups.test.ts runs this part again, after 012's)
UPDATE rollup_project_senders r SET operations = s.n, cost_wei = s.cost
FROM (SELECT project_id, sender, count(*) AS n, sum(actual_gas_cost) AS cost FROM sponsorships
      WHERE status IN ('success', 'reverted') GROUP BY project_id, sender) s
WHERE r.project_id = s.project_id AND r.sender = s.sender;
INSERT INTO rollup_project_sender_days (project_id, day, sender, operations)
  SELECT project_id, (settled_at AT TIME ZONE 'UTC')::date, sender, count(*) FROM sponsorships
  WHERE status IN ('success', 'reverted') AND settled_at IS NOT NULL GROUP BY 1, 2, 3;
INSERT INTO rollup_project_days AS t (project_id, day, active_senders)
  SELECT project_id, day, count(*) FROM rollup_project_sender_days GROUP BY project_id, day
  ON CONFLICT (project_id, day) DO UPDATE SET active_senders = EXCLUDED.active_senders;
INSERT INTO rollup_project_days AS t (project_id, day, latest_senders)
  SELECT project_id, (last_settled_at AT TIME ZONE 'UTC')::date, count(*) FROM rollup_project_senders GROUP BY 1, 2
  ON CONFLICT (project_id, day) DO UPDATE SET latest_senders = EXCLUDED.latest_senders;
-- END BACKFILL
