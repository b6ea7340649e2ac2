-- sponsorship.sponsored: statement-level, so a reservation that inserts a batch of
-- authorizations in one statement writes their events in one statement too.
CREATE OR REPLACE FUNCTION sponsorships_emit_sponsored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM emit_event(n.project_id, 'sponsorship.sponsored', jsonb_build_object(
      'authorizationId', n.auth_id,
      'chainId', n.chain_id,
      'mode', n.mode,
      'sender', n.sender,
      'target', n.target,
      'selector', n.selector,
      'calls', COALESCE(n.calls, jsonb_build_array(jsonb_build_object('target', n.target, 'selector', n.selector))),
      'maxTotalGas', n.estimated_gas::text,
      'maxGasCost', n.max_gas_cost::text,
      'validAfter', n.valid_after,
      'validUntil', n.valid_until,
      'sponsoredAt', n.created_at))
    FROM (SELECT * FROM new_rows ORDER BY id) n
    WHERE webhook_subscribed(n.project_id, 'sponsorship.sponsored');
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_sponsored_event AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorships_emit_sponsored();
