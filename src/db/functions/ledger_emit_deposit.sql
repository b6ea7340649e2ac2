-- deposit.credited: only deposit entries call the function (the WHEN clause is evaluated
-- without it), so the reservation's ledger entries cost nothing here.
CREATE OR REPLACE FUNCTION ledger_emit_deposit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(NEW.project_id, 'deposit.credited') THEN
    PERFORM emit_event(NEW.project_id, 'deposit.credited', jsonb_build_object(
      'reference', NEW.reference,
      'amount', NEW.amount::text,
      -- The chain whose tank it credited (migration 035); chain deposits are referenced
      -- `<chainId>:<txHash>:<position>` (funding/store.ts).
      'chainId', NEW.chain_id,
      'txHash', substring(NEW.reference FROM '^[0-9]+:(0x[0-9a-f]{64})'),
      'creditedAt', NEW.created_at));
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER ledger_deposit_event AFTER INSERT ON ledger_entries
  FOR EACH ROW WHEN (NEW.kind = 'deposit') EXECUTE FUNCTION ledger_emit_deposit();
