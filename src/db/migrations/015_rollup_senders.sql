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
