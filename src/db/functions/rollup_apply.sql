-- As in 012, with the senders' part moved to rollup_apply_senders, and every row per chain (039).
CREATE OR REPLACE FUNCTION rollup_apply(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- Rollup rows are locked after the project's row, as every writer of a project does: a
  -- reservation locks the project first, and a settlement would otherwise lock the totals
  -- (through this trigger) before its ledger entry locks the project, and the two could
  -- deadlock. The reservation already holds a stronger lock, so this costs it nothing.
  PERFORM 1 FROM projects WHERE id IN (SELECT DISTINCT d.project_id FROM unnest(p_rows) d)
    ORDER BY id FOR NO KEY UPDATE;
  INSERT INTO rollup_project_totals AS t (project_id, chain_id, pending, success, reverted, expired, gas_used, cost_wei)
    SELECT d.project_id, d.chain_id,
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'pending'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'success'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'reverted'), 0),
      COALESCE(sum(d.sign) FILTER (WHERE d.status = 'expired'), 0),
      COALESCE(sum(d.sign * d.actual_gas) FILTER (WHERE d.status IN ('success', 'reverted')), 0),
      COALESCE(sum(d.sign * d.actual_gas_cost) FILTER (WHERE d.status IN ('success', 'reverted')), 0)
    FROM unnest(p_rows) d GROUP BY d.project_id, d.chain_id ORDER BY d.project_id, d.chain_id
  ON CONFLICT (project_id, chain_id) DO UPDATE SET
    pending = t.pending + EXCLUDED.pending,
    success = t.success + EXCLUDED.success,
    reverted = t.reverted + EXCLUDED.reverted,
    expired = t.expired + EXCLUDED.expired,
    gas_used = t.gas_used + EXCLUDED.gas_used,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  -- A row counts on two days: the day it was authorized, and the day it reached its state.
  INSERT INTO rollup_project_days AS t (project_id, chain_id, day, authorized, success, reverted, expired, gas_used, cost_wei)
    SELECT x.project_id, x.chain_id, x.day, sum(x.authorized), sum(x.success), sum(x.reverted), sum(x.expired),
      sum(x.gas_used), sum(x.cost_wei)
    FROM (
      SELECT d.project_id, d.chain_id, (d.created_at AT TIME ZONE 'UTC')::date AS day, d.sign::bigint AS authorized,
        0::bigint AS success, 0::bigint AS reverted, 0::bigint AS expired, 0::numeric AS gas_used, 0::numeric AS cost_wei
      FROM unnest(p_rows) d
      UNION ALL
      SELECT d.project_id, d.chain_id, (d.settled_at AT TIME ZONE 'UTC')::date,
        0, (d.sign * (d.status = 'success')::int)::bigint, (d.sign * (d.status = 'reverted')::int)::bigint,
        (d.sign * (d.status = 'expired')::int)::bigint,
        CASE WHEN d.status IN ('success', 'reverted') THEN d.sign * d.actual_gas ELSE 0 END,
        CASE WHEN d.status IN ('success', 'reverted') THEN d.sign * d.actual_gas_cost ELSE 0 END
      FROM unnest(p_rows) d WHERE d.status <> 'pending' AND d.settled_at IS NOT NULL
    ) x
    GROUP BY x.project_id, x.chain_id, x.day
    HAVING sum(x.authorized) <> 0 OR sum(x.success) <> 0 OR sum(x.reverted) <> 0 OR sum(x.expired) <> 0
      OR sum(x.gas_used) <> 0 OR sum(x.cost_wei) <> 0
    ORDER BY x.project_id, x.chain_id, x.day
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET
    authorized = t.authorized + EXCLUDED.authorized,
    success = t.success + EXCLUDED.success,
    reverted = t.reverted + EXCLUDED.reverted,
    expired = t.expired + EXCLUDED.expired,
    gas_used = t.gas_used + EXCLUDED.gas_used,
    cost_wei = t.cost_wei + EXCLUDED.cost_wei;

  INSERT INTO rollup_project_targets AS t (project_id, chain_id, target, calls, gas_used)
    SELECT d.project_id, d.chain_id, d.target, sum(d.sign), sum(d.sign * d.actual_gas)
    FROM unnest(p_rows) d WHERE d.status IN ('success', 'reverted')
    GROUP BY d.project_id, d.chain_id, d.target
    HAVING sum(d.sign) <> 0 OR sum(d.sign * d.actual_gas) <> 0
    ORDER BY d.project_id, d.chain_id, d.target
  ON CONFLICT (project_id, chain_id, target) DO UPDATE SET
    calls = t.calls + EXCLUDED.calls,
    gas_used = t.gas_used + EXCLUDED.gas_used;

  PERFORM rollup_apply_senders(p_rows);
END $$;
