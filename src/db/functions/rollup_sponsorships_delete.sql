-- Takes deleted sponsorships back out of the rollups, as a statement-level trigger.
CREATE OR REPLACE FUNCTION rollup_sponsorships_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM rollup_apply(ARRAY(SELECT ROW(-1, o.project_id, o.status, o.created_at, o.settled_at, o.sender,
      o.target, o.actual_gas, o.actual_gas_cost, o.chain_id)::rollup_delta FROM old_rows o));
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_rollup_delete AFTER DELETE ON sponsorships
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rollup_sponsorships_delete();
