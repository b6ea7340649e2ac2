-- spend.unattributed: the settlement watcher records an operation with what was billed (one
-- INSERT, after the billing); paid on chain but not (fully) charged to this project's tank. Spend
-- that cannot be tied to any project is the operator's concern (chain parity), not a project's.
CREATE OR REPLACE FUNCTION chain_operations_emit_unattributed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(NEW.project_id, 'spend.unattributed') THEN
    PERFORM emit_event(NEW.project_id, 'spend.unattributed', jsonb_build_object(
      'chainId', NEW.chain_id,
      'txHash', '0x' || encode(NEW.tx_hash, 'hex'),
      'userOpHash', '0x' || encode(NEW.user_op_hash, 'hex'),
      'authorizationId', '0x' || encode(NEW.auth_id, 'hex'),
      'sender', '0x' || encode(NEW.sender, 'hex'),
      'actualGasCost', NEW.actual_gas_cost::text,
      'billed', NEW.billed::text,
      'unattributed', (NEW.actual_gas_cost - NEW.billed)::text,
      'reason', NEW.unbilled_reason));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER chain_operations_unattributed_event AFTER INSERT ON chain_operations
  FOR EACH ROW WHEN (NEW.project_id IS NOT NULL AND NEW.billed < NEW.actual_gas_cost)
  EXECUTE FUNCTION chain_operations_emit_unattributed();
