-- Re-reads the latest settled time of each sender a batch touched, for when a reversal takes away
-- the operation that was its latest.
CREATE OR REPLACE FUNCTION rollup_refresh_senders(p_rows rollup_delta[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  WITH touched AS (
    SELECT DISTINCT d.project_id, d.chain_id, d.sender FROM unnest(p_rows) d
    WHERE d.sign < 0 AND d.status IN ('success', 'reverted')
  ), latest AS (
    SELECT t.project_id, t.chain_id, t.sender,
      (SELECT max(s.settled_at) FROM sponsorships s
        WHERE s.project_id = t.project_id AND s.chain_id = t.chain_id
          -- The index on the digest of the project and the address (migration 045, the expression
          -- of db/bytes.ts projectAddressKey), then the address itself.
          AND ('x' || left(md5(s.project_id || '/' || s.sender), 16))::bit(64)::bigint
            = ('x' || left(md5(t.project_id || '/' || t.sender), 16))::bit(64)::bigint
          AND s.sender = t.sender AND s.status IN ('success', 'reverted')) AS at
    FROM touched t
  ), gone AS (
    DELETE FROM rollup_project_senders r USING latest l
    WHERE l.at IS NULL AND r.project_id = l.project_id AND r.chain_id = l.chain_id AND r.sender = l.sender
  )
  UPDATE rollup_project_senders r SET last_settled_at = l.at FROM latest l
  WHERE l.at IS NOT NULL AND r.project_id = l.project_id AND r.chain_id = l.chain_id AND r.sender = l.sender;
END $$;
