-- Writes the sponsorship.sponsored events of sponsorships made since the relay last passed each
-- subscribed project (migration 055 says why they are not written by the reservation itself), at
-- most p_limit sponsorships per project and no further project once p_limit are passed, and answers
-- how many sponsorships it passed: p_limit or more means there may be more waiting. Run by every
-- instance's webhook worker (webhooks/relay.ts).
--
-- Each project's cursor is taken with SKIP LOCKED, so instances relaying at once share the
-- projects out; the events and the cursor's move commit together, so each sponsorship's event is
-- written once. The last sequence number is read with the cursor: every sponsorship up to it has
-- committed (they are numbered under the project's row lock), and is read by its (project key,
-- seq) index entry. A project no enabled endpoint subscribes to any more has its cursor moved to
-- that number without an event: what it sponsored while unsubscribed is not reported later.
CREATE OR REPLACE FUNCTION relay_sponsored_events(p_limit integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  c record;
  v_upto bigint;
  v_passed bigint := 0;
BEGIN
  FOR c IN
    SELECT k.project_id, k.last_seq, p.sponsorships_seq AS head
    FROM sponsored_event_cursors k JOIN projects p ON p.id = k.project_id
    WHERE p.sponsorships_seq > k.last_seq
    ORDER BY k.project_id
    FOR UPDATE OF k SKIP LOCKED
  LOOP
    IF webhook_subscribed(c.project_id, 'sponsorship.sponsored') THEN
      v_upto := LEAST(c.head, c.last_seq + p_limit);
      PERFORM emit_events('sponsorship.sponsored', array_agg(s.project_id ORDER BY s.seq), array_agg(jsonb_build_object(
          'authorizationId', '0x' || encode(s.auth_id, 'hex'),
          'chainId', s.chain_id,
          'mode', s.mode,
          'sender', s.sender,
          'target', s.target,
          'selector', s.selector,
          'calls', COALESCE(s.calls, jsonb_build_array(jsonb_build_object('target', s.target, 'selector', s.selector))),
          'maxTotalGas', s.estimated_gas::text,
          'maxGasCost', s.max_gas_cost::text,
          'validAfter', s.valid_after,
          'validUntil', s.valid_until,
          'sponsoredAt', s.created_at) ORDER BY s.seq))
        FROM sponsorships s
        WHERE ('x' || left(md5(s.project_id), 16))::bit(64)::bigint = ('x' || left(md5(c.project_id), 16))::bit(64)::bigint
          AND s.seq > c.last_seq AND s.seq <= v_upto AND s.project_id = c.project_id
        HAVING count(*) > 0;
      v_passed := v_passed + (v_upto - c.last_seq);
    ELSE
      v_upto := c.head;
    END IF;
    UPDATE sponsored_event_cursors SET last_seq = v_upto WHERE project_id = c.project_id;
    -- One pass writes about p_limit events at most, whatever the number of projects behind (a
    -- backlog after an outage): the caller passes again while a pass comes back full.
    EXIT WHEN v_passed >= p_limit;
  END LOOP;
  RETURN v_passed;
END $$;
