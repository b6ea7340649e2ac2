-- A reservation inserts pending rows, which count in two places only: the totals' pending and
-- the day's authorized (with the day's id bounds, migration 023). That common case takes two
-- upserts and nothing else (it runs once per reservation, on authorize's path); anything else
-- takes the general path. The project's row is already locked by the reservation, which takes
-- it first.
CREATE OR REPLACE FUNCTION rollup_sponsorships_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'pending') THEN
    INSERT INTO rollup_project_totals AS t (project_id, chain_id, pending)
      SELECT project_id, chain_id, count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (project_id, chain_id) DO UPDATE SET pending = t.pending + EXCLUDED.pending;
    INSERT INTO rollup_project_days AS t (project_id, chain_id, day, authorized, first_id, last_id)
      SELECT project_id, chain_id, (created_at AT TIME ZONE 'UTC')::date, count(*), min(id), max(id)
      FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, chain_id, day) DO UPDATE SET authorized = t.authorized + EXCLUDED.authorized,
      first_id = LEAST(t.first_id, EXCLUDED.first_id), last_id = GREATEST(t.last_id, EXCLUDED.last_id);
    RETURN NULL;
  END IF;
  PERFORM rollup_apply(ARRAY(SELECT ROW(1, n.project_id, n.status, n.created_at, n.settled_at, n.sender,
      n.target, n.actual_gas, n.actual_gas_cost, n.chain_id)::rollup_delta FROM new_rows n));
  INSERT INTO rollup_project_days AS t (project_id, chain_id, day, first_id, last_id)
    SELECT project_id, chain_id, (created_at AT TIME ZONE 'UTC')::date, min(id), max(id)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (project_id, chain_id, day) DO UPDATE SET
    first_id = LEAST(t.first_id, EXCLUDED.first_id), last_id = GREATEST(t.last_id, EXCLUDED.last_id);
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_rollup_insert AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_insert();
