-- balance.low: once per crossing from at-or-above the threshold to below it. Only decreases call
-- the function; the reservation decreases the balance once per batch.
CREATE OR REPLACE FUNCTION projects_emit_low_balance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_threshold numeric;
BEGIN
  -- The home chain's own threshold when it has one (migration 040), else the project's.
  SELECT CASE WHEN low_balance_thresholds ? NEW.home_chain_id::text
    THEN (low_balance_thresholds ->> NEW.home_chain_id::text)::numeric ELSE low_balance_threshold END
  INTO v_threshold FROM project_webhook_settings WHERE project_id = NEW.id;
  IF v_threshold IS NOT NULL AND OLD.gas_tank_balance >= v_threshold AND NEW.gas_tank_balance < v_threshold
      AND webhook_subscribed(NEW.id, 'balance.low') THEN
    PERFORM emit_event(NEW.id, 'balance.low', jsonb_build_object(
      -- The home chain's tank (projects.gas_tank_balance, migration 035).
      'chainId', NEW.home_chain_id,
      'balance', NEW.gas_tank_balance::text,
      'threshold', v_threshold::text));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER projects_low_balance_event AFTER UPDATE OF gas_tank_balance ON projects
  FOR EACH ROW WHEN (NEW.gas_tank_balance < OLD.gas_tank_balance) EXECUTE FUNCTION projects_emit_low_balance();
