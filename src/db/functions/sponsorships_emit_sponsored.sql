-- sponsorship.sponsored: statement-level, so a reservation that inserts a batch of
-- authorizations in one statement writes their events in one statement too (emit_events), and
-- the outbox's fan-out trigger runs once for the batch.
CREATE OR REPLACE FUNCTION sponsorships_emit_sponsored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM emit_events('sponsorship.sponsored', array_agg(n.project_id ORDER BY n.id), array_agg(jsonb_build_object(
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
      'sponsoredAt', n.created_at) ORDER BY n.id))
    FROM new_rows n
    WHERE webhook_subscribed(n.project_id, 'sponsorship.sponsored')
    HAVING count(*) > 0;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_sponsored_event AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorships_emit_sponsored();
