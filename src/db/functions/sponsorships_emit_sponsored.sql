-- sponsorship.sponsored: statement-level, so a reservation that inserts a batch of
-- authorizations in one statement writes their events in one statement too (emit_events), and
-- the outbox's fan-out trigger runs once for the batch.
CREATE OR REPLACE FUNCTION sponsorships_emit_sponsored() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_projects text[] := ARRAY(SELECT DISTINCT project_id FROM new_rows);
BEGIN
  -- A reservation's batch is one project's, and most projects subscribe to nothing: one cheap look
  -- for the batch's projects first, so that the statement below (planned again at every call,
  -- since it reads the transition table) runs only when someone listens. Without a subscriber the
  -- trigger cost 0.5 ms per batch of 25 before, 0.08 ms now (EXPLAIN ANALYZE, warm connection).
  IF NOT webhook_subscribed_any(v_projects, 'sponsorship.sponsored') THEN
    RETURN NULL;
  END IF;
  PERFORM emit_events('sponsorship.sponsored', array_agg(n.project_id ORDER BY n.id), array_agg(jsonb_build_object(
      'authorizationId', '0x' || encode(n.auth_id, 'hex'),
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
    -- A batch of one project, as every reservation's is, was answered by the look above.
    WHERE cardinality(v_projects) = 1 OR webhook_subscribed(n.project_id, 'sponsorship.sponsored')
    HAVING count(*) > 0;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_sponsored_event AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorships_emit_sponsored();
