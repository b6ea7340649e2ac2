-- The rollups per chain (issue 23). Costs and gas are amounts of one chain's currency, and a
-- studio reads its figures chain by chain, so every rollup row of migrations 012, 015 and 023
-- now belongs to one (project, chain): totals, days, targets, senders and sender days. A reader
-- that wants the whole project (the events' total) sums a project's few chain rows.
--
-- The rows are rebuilt from the sponsorships, each of which names its chain: before this
-- migration the rollups mixed the chains of a project (only 14601 was served until migration
-- 035, but one made since could hold another). The rollup triggers always keep the rows equal to
-- a recomputation over the sponsorships there are, so the rebuild loses nothing.

LOCK TABLE sponsorships IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE rollup_project_totals ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE rollup_project_totals ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE rollup_project_totals DROP CONSTRAINT rollup_project_totals_pkey;
ALTER TABLE rollup_project_totals ADD PRIMARY KEY (project_id, chain_id);

ALTER TABLE rollup_project_days ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE rollup_project_days ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE rollup_project_days DROP CONSTRAINT rollup_project_days_pkey;
ALTER TABLE rollup_project_days ADD PRIMARY KEY (project_id, chain_id, day);

ALTER TABLE rollup_project_targets ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE rollup_project_targets ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE rollup_project_targets DROP CONSTRAINT rollup_project_targets_pkey;
ALTER TABLE rollup_project_targets ADD PRIMARY KEY (project_id, chain_id, target);
DROP INDEX rollup_project_targets_top;
CREATE INDEX rollup_project_targets_top ON rollup_project_targets (project_id, chain_id, calls DESC, target);

ALTER TABLE rollup_project_senders ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE rollup_project_senders ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE rollup_project_senders DROP CONSTRAINT rollup_project_senders_pkey;
ALTER TABLE rollup_project_senders ADD PRIMARY KEY (project_id, chain_id, sender);
DROP INDEX rollup_project_senders_recent;
DROP INDEX rollup_project_senders_by_operations;
DROP INDEX rollup_project_senders_by_cost;
CREATE INDEX rollup_project_senders_recent ON rollup_project_senders (project_id, chain_id, last_settled_at);
CREATE INDEX rollup_project_senders_by_operations
  ON rollup_project_senders (project_id, chain_id, operations DESC, cost_wei DESC, sender);
CREATE INDEX rollup_project_senders_by_cost
  ON rollup_project_senders (project_id, chain_id, cost_wei DESC, operations DESC, sender);

ALTER TABLE rollup_project_sender_days ADD COLUMN chain_id integer NOT NULL DEFAULT 14601;
ALTER TABLE rollup_project_sender_days ALTER COLUMN chain_id DROP DEFAULT;
ALTER TABLE rollup_project_sender_days DROP CONSTRAINT rollup_project_sender_days_pkey;
ALTER TABLE rollup_project_sender_days ADD PRIMARY KEY (project_id, chain_id, day, sender);

-- The triggers' row types carry the chain (db/functions builds them with it).
ALTER TYPE rollup_delta ADD ATTRIBUTE chain_id integer;
ALTER TYPE rollup_sender_latest ADD ATTRIBUTE chain_id integer;

-- BEGIN BACKFILL (test/rollups.test.ts runs this part again on a live database)
DELETE FROM rollup_project_totals;
DELETE FROM rollup_project_days;
DELETE FROM rollup_project_targets;
DELETE FROM rollup_project_senders;
DELETE FROM rollup_project_sender_days;
INSERT INTO rollup_project_totals (project_id, chain_id, pending, success, reverted, expired, gas_used, cost_wei)
  SELECT project_id, chain_id,
    count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'success'),
    count(*) FILTER (WHERE status = 'reverted'), count(*) FILTER (WHERE status = 'expired'),
    COALESCE(sum(actual_gas) FILTER (WHERE status IN ('success', 'reverted')), 0),
    COALESCE(sum(actual_gas_cost) FILTER (WHERE status IN ('success', 'reverted')), 0)
  FROM sponsorships GROUP BY project_id, chain_id;
-- A row counts on the day it was authorized (with that day's id bounds) and on the day it
-- reached its state.
INSERT INTO rollup_project_days (project_id, chain_id, day, authorized, success, reverted, expired,
    gas_used, cost_wei, first_id, last_id)
  SELECT project_id, chain_id, day, sum(a), sum(s), sum(r), sum(e), sum(g), sum(c), min(lo), max(hi) FROM (
    SELECT project_id, chain_id, (created_at AT TIME ZONE 'UTC')::date AS day, 1 AS a, 0 AS s, 0 AS r,
      0 AS e, 0::numeric AS g, 0::numeric AS c, id AS lo, id AS hi
    FROM sponsorships
    UNION ALL
    SELECT project_id, chain_id, (settled_at AT TIME ZONE 'UTC')::date, 0, (status = 'success')::int,
      (status = 'reverted')::int, (status = 'expired')::int,
      CASE WHEN status IN ('success', 'reverted') THEN actual_gas ELSE 0 END,
      CASE WHEN status IN ('success', 'reverted') THEN actual_gas_cost ELSE 0 END, NULL, NULL
    FROM sponsorships WHERE status <> 'pending' AND settled_at IS NOT NULL) x
  GROUP BY project_id, chain_id, day;
INSERT INTO rollup_project_targets (project_id, chain_id, target, calls, gas_used)
  SELECT project_id, chain_id, target, count(*), sum(actual_gas) FROM sponsorships
  WHERE status IN ('success', 'reverted') GROUP BY project_id, chain_id, target;
INSERT INTO rollup_project_senders (project_id, chain_id, sender, last_settled_at, operations, cost_wei)
  SELECT project_id, chain_id, sender, max(settled_at), count(*), sum(actual_gas_cost) FROM sponsorships
  WHERE status IN ('success', 'reverted') GROUP BY project_id, chain_id, sender
  HAVING max(settled_at) IS NOT NULL;
INSERT INTO rollup_project_sender_days (project_id, chain_id, day, sender, operations)
  SELECT project_id, chain_id, (settled_at AT TIME ZONE 'UTC')::date, sender, count(*) FROM sponsorships
  WHERE status IN ('success', 'reverted') AND settled_at IS NOT NULL GROUP BY 1, 2, 3, 4;
INSERT INTO rollup_project_days AS t (project_id, chain_id, day, active_senders)
  SELECT project_id, chain_id, day, count(*) FROM rollup_project_sender_days GROUP BY 1, 2, 3
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET active_senders = EXCLUDED.active_senders;
INSERT INTO rollup_project_days AS t (project_id, chain_id, day, latest_senders)
  SELECT project_id, chain_id, (last_settled_at AT TIME ZONE 'UTC')::date, count(*) FROM rollup_project_senders
  GROUP BY 1, 2, 3
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET latest_senders = EXCLUDED.latest_senders;
-- END BACKFILL
