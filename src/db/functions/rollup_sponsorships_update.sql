-- Only rows whose contribution changed take part: an update of other columns costs one empty
-- comparison.
CREATE OR REPLACE FUNCTION rollup_sponsorships_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_rows rollup_delta[];
BEGIN
  v_rows := ARRAY(
    SELECT x FROM old_rows o JOIN new_rows n ON n.id = o.id,
      LATERAL (VALUES
        (ROW(-1, o.project_id, o.status, o.created_at, o.settled_at, o.sender, o.target, o.actual_gas,
          o.actual_gas_cost, o.chain_id)::rollup_delta),
        (ROW(1, n.project_id, n.status, n.created_at, n.settled_at, n.sender, n.target, n.actual_gas,
          n.actual_gas_cost, n.chain_id)::rollup_delta)) AS v(x)
    WHERE (o.project_id, o.chain_id, o.status, o.created_at, o.settled_at, o.sender, o.target, o.actual_gas, o.actual_gas_cost)
      IS DISTINCT FROM
      (n.project_id, n.chain_id, n.status, n.created_at, n.settled_at, n.sender, n.target, n.actual_gas, n.actual_gas_cost));
  IF cardinality(v_rows) > 0 THEN
    PERFORM rollup_apply(v_rows);
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_rollup_update AFTER UPDATE ON sponsorships
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_update();
