-- sponsorship.settled / .expired / .settlement_reversed: row-level with a WHEN clause, so the
-- reservation's own updates of sponsorships (forgetting old nonces) never call it.
CREATE OR REPLACE FUNCTION sponsorships_emit_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_type text;
  v_payload jsonb;
BEGIN
  IF NEW.status IN ('success', 'reverted') THEN
    v_type := 'sponsorship.settled';
    v_payload := jsonb_build_object(
      'outcome', NEW.status,
      'actualGas', NEW.actual_gas::text,
      'actualGasCost', NEW.actual_gas_cost::text,
      'txHash', '0x' || encode(NEW.tx_hash, 'hex'),
      'userOpHash', '0x' || encode(NEW.user_op_hash, 'hex'),
      -- Charged after the reservation had been released (only after a deep reorganisation).
      'late', OLD.status = 'expired');
  ELSIF OLD.status = 'pending' THEN
    v_type := 'sponsorship.expired';
    v_payload := jsonb_build_object('releasedWei', NEW.max_gas_cost::text);
  ELSE
    -- A reorganisation removed the block that settled it: the charge was given back.
    v_type := 'sponsorship.settlement_reversed';
    v_payload := jsonb_build_object('previousOutcome', OLD.status, 'reversedWei', OLD.actual_gas_cost::text);
  END IF;
  IF webhook_subscribed(NEW.project_id, v_type) THEN
    PERFORM emit_event(NEW.project_id, v_type, v_payload || jsonb_build_object(
      'authorizationId', '0x' || encode(NEW.auth_id, 'hex'),
      'chainId', NEW.chain_id,
      'sender', NEW.sender,
      'maxGasCost', NEW.max_gas_cost::text));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_status_event AFTER UPDATE OF status ON sponsorships
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sponsorships_emit_status();
