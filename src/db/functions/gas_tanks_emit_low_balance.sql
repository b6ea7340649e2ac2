-- balance.low for a project's tanks on its other chains (gas_tanks, migration 035), as
-- projects_emit_low_balance.sql does for its home chain's: once per crossing from at-or-above the
-- chain's threshold to below it, in that chain's smallest unit. Only decreases call the function.
CREATE OR REPLACE FUNCTION gas_tanks_emit_low_balance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_threshold numeric;
BEGIN
  -- The chain's own threshold when it has one (migration 040), else the project's.
  SELECT CASE WHEN low_balance_thresholds ? NEW.chain_id::text
    THEN (low_balance_thresholds ->> NEW.chain_id::text)::numeric ELSE low_balance_threshold END
  INTO v_threshold FROM project_webhook_settings WHERE project_id = NEW.project_id;
  IF v_threshold IS NOT NULL AND OLD.balance >= v_threshold AND NEW.balance < v_threshold
      AND webhook_subscribed(NEW.project_id, 'balance.low') THEN
    PERFORM emit_event(NEW.project_id, 'balance.low', jsonb_build_object(
      'chainId', NEW.chain_id,
      'balance', NEW.balance::text,
      'threshold', v_threshold::text));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER gas_tanks_low_balance_event AFTER UPDATE OF balance ON gas_tanks
  FOR EACH ROW WHEN (NEW.balance < OLD.balance) EXECUTE FUNCTION gas_tanks_emit_low_balance();
