-- The per-sender rollups (operations, cost, each sender's latest settled day, daily actives) of a
-- batch of sponsorship changes; called by rollup_apply.
CREATE OR REPLACE FUNCTION rollup_apply_senders(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_before rollup_sender_latest[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')) THEN
    RETURN;
  END IF;
  -- Settlements only add (no settled row leaves): everything in one statement. Each sub-statement
  -- sees the rows as they were before it, and its RETURNING what it wrote. The watcher settles an
  -- operation per transaction, so this runs once per settled operation: five statements were
  -- about 800 us of PostgreSQL per settlement, one is about 680 (20,000 operations, 2,500 settled
  -- one per transaction, four runs each, 2026-11-28). A reversal takes the general path below.
  IF NOT EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.sign < 0 AND d.status IN ('success', 'reverted')) THEN
    WITH d AS (
      SELECT d.project_id, d.chain_id, d.sender, d.settled_at, d.actual_gas_cost
      FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')
    ), before AS (
      SELECT r.project_id, r.chain_id, r.last_settled_at FROM rollup_project_senders r
      WHERE (r.project_id, r.chain_id, r.sender) IN (SELECT d.project_id, d.chain_id, d.sender FROM d)
    ), senders AS (
      INSERT INTO rollup_project_senders AS t (project_id, chain_id, sender, last_settled_at, operations, cost_wei)
        SELECT d.project_id, d.chain_id, d.sender, COALESCE(max(d.settled_at), '-infinity'), count(*),
          sum(d.actual_gas_cost)
        FROM d GROUP BY d.project_id, d.chain_id, d.sender ORDER BY d.project_id, d.chain_id, d.sender
      ON CONFLICT (project_id, chain_id, sender) DO UPDATE SET
        last_settled_at = GREATEST(t.last_settled_at, EXCLUDED.last_settled_at),
        operations = t.operations + EXCLUDED.operations,
        cost_wei = t.cost_wei + EXCLUDED.cost_wei
      RETURNING t.project_id, t.chain_id, t.last_settled_at
    ), n AS (
      -- Per sender and day, the sender as its 20 bytes (migration 047).
      SELECT d.project_id, d.chain_id, (d.settled_at AT TIME ZONE 'UTC')::date AS day,
        decode(substr(d.sender, 3), 'hex') AS sender, count(*) AS n
      FROM d WHERE d.settled_at IS NOT NULL GROUP BY 1, 2, 3, 4
    ), sender_days AS (
      INSERT INTO rollup_project_sender_days AS t (project_id, chain_id, day, sender, operations)
        SELECT n.project_id, n.chain_id, n.day, n.sender, n.n FROM n ORDER BY 1, 2, 3, 4
      ON CONFLICT (project_id, chain_id, day, sender) DO UPDATE SET operations = t.operations + EXCLUDED.operations
      RETURNING t.project_id, t.chain_id, t.day, t.sender, t.operations
    ), moves AS (
      -- A sender becomes active on a day when its count there leaves 0; it leaves the day of its
      -- latest settled operation before and joins the one after (the same day cancels out).
      SELECT u.project_id, u.chain_id, u.day, 1 AS active, 0 AS latest
      FROM sender_days u JOIN n ON n.project_id = u.project_id AND n.chain_id = u.chain_id AND n.day = u.day
        AND n.sender = u.sender
      WHERE u.operations = n.n
      UNION ALL
      SELECT b.project_id, b.chain_id, (b.last_settled_at AT TIME ZONE 'UTC')::date, 0, -1 FROM before b
      UNION ALL
      SELECT s.project_id, s.chain_id, (s.last_settled_at AT TIME ZONE 'UTC')::date, 0, 1 FROM senders s
    )
    INSERT INTO rollup_project_days AS t (project_id, chain_id, day, active_senders, latest_senders)
      SELECT m.project_id, m.chain_id, m.day, sum(m.active), sum(m.latest) FROM moves m
      GROUP BY m.project_id, m.chain_id, m.day HAVING sum(m.active) <> 0 OR sum(m.latest) <> 0
      ORDER BY m.project_id, m.chain_id, m.day
    ON CONFLICT (project_id, chain_id, day) DO UPDATE SET
      active_senders = t.active_senders + EXCLUDED.active_senders,
      latest_senders = t.latest_senders + EXCLUDED.latest_senders;
    RETURN;
  END IF;

  -- The caller holds every touched project's row lock, so nothing moves these rows meanwhile.
  v_before := ARRAY(
    SELECT ROW(r.project_id, r.sender, r.last_settled_at, r.chain_id)::rollup_sender_latest
    FROM rollup_project_senders r
    WHERE (r.project_id, r.chain_id, r.sender) IN (
      SELECT d.project_id, d.chain_id, d.sender FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')));

  -- Per sender: settled operations, their cost, and the latest settled time, which a new settled
  -- operation can only move forward. A sender that only lost operations gets its latest time
  -- read again below.
  INSERT INTO rollup_project_senders AS t (project_id, chain_id, sender, last_settled_at, operations, cost_wei)
    SELECT d.project_id, d.chain_id, d.sender, COALESCE(max(d.settled_at) FILTER (WHERE d.sign > 0), '-infinity'),
      sum(d.sign), sum(d.sign * d.actual_gas_cost)
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')
    GROUP BY d.project_id, d.chain_id, d.sender ORDER BY d.project_id, d.chain_id, d.sender
  ON CONFLICT (project_id, chain_id, sender) DO UPDATE SET
    last_settled_at = GREATEST(t.last_settled_at, EXCLUDED.last_settled_at),
    operations = t.operations + EXCLUDED.operations,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  -- Per sender and day; a day's distinct senders change when a sender's count there leaves or
  -- reaches 0.
  WITH d AS (
    SELECT d.project_id, d.chain_id, (d.settled_at AT TIME ZONE 'UTC')::date AS day,
      decode(substr(d.sender, 3), 'hex') AS sender, sum(d.sign)::bigint AS n
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted') AND d.settled_at IS NOT NULL
    GROUP BY 1, 2, 3, 4 HAVING sum(d.sign) <> 0
  ), u AS (
    INSERT INTO rollup_project_sender_days AS t (project_id, chain_id, day, sender, operations)
      SELECT project_id, chain_id, day, sender, n FROM d ORDER BY project_id, chain_id, day, sender
    ON CONFLICT (project_id, chain_id, day, sender) DO UPDATE SET operations = t.operations + EXCLUDED.operations
    RETURNING t.project_id, t.chain_id, t.day, t.sender, t.operations
  )
  INSERT INTO rollup_project_days AS t (project_id, chain_id, day, active_senders)
    SELECT u.project_id, u.chain_id, u.day, sum((u.operations > 0)::int - (u.operations - d.n > 0)::int)
    FROM u JOIN d ON d.project_id = u.project_id AND d.chain_id = u.chain_id AND d.day = u.day
      AND d.sender = u.sender
    GROUP BY u.project_id, u.chain_id, u.day
    HAVING sum((u.operations > 0)::int - (u.operations - d.n > 0)::int) <> 0
    ORDER BY u.project_id, u.chain_id, u.day
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET active_senders = t.active_senders + EXCLUDED.active_senders;

  -- A reversal: the touched senders' latest times are read again from their own operations
  -- (rare, and bounded by those senders), and emptied rows go.
  IF EXISTS (SELECT 1 FROM unnest(p_rows) d WHERE d.sign < 0 AND d.status IN ('success', 'reverted')) THEN
    PERFORM rollup_refresh_senders(p_rows);
    DELETE FROM rollup_project_sender_days r
    WHERE r.operations = 0 AND (r.project_id, r.chain_id, r.sender) IN (
      SELECT d.project_id, d.chain_id, decode(substr(d.sender, 3), 'hex') FROM unnest(p_rows) d
      WHERE d.sign < 0 AND d.status IN ('success', 'reverted'));
  END IF;

  -- Each touched sender leaves the day of its latest settled operation before, and joins the one
  -- after (the same day when nothing moved, which cancels out).
  INSERT INTO rollup_project_days AS t (project_id, chain_id, day, latest_senders)
    SELECT m.project_id, m.chain_id, m.day, sum(m.n) FROM (
      SELECT b.project_id, b.chain_id, (b.at AT TIME ZONE 'UTC')::date AS day, -1 AS n FROM unnest(v_before) b
      UNION ALL
      SELECT r.project_id, r.chain_id, (r.last_settled_at AT TIME ZONE 'UTC')::date, 1
      FROM rollup_project_senders r
      WHERE (r.project_id, r.chain_id, r.sender) IN (
        SELECT d.project_id, d.chain_id, d.sender FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted'))
    ) m
    GROUP BY m.project_id, m.chain_id, m.day HAVING sum(m.n) <> 0 ORDER BY m.project_id, m.chain_id, m.day
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET latest_senders = t.latest_senders + EXCLUDED.latest_senders;
END $$;
