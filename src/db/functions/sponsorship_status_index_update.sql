-- sponsorship_status_index (migration 021) follows every change of a sponsorship's status or of
-- the columns it copies: the old entry goes, and the new one comes unless the status is success.
-- Rows whose copied columns did not change cost one comparison. open_reservations (migration 054)
-- loses the changed rows' old pending cost and gains their new one, in key order.
CREATE OR REPLACE FUNCTION sponsorship_status_index_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_changed bigint[];
BEGIN
  v_changed := ARRAY(
    SELECT n.id FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE (o.project_id, o.chain_id, o.status, o.sender, o.paymaster, o.valid_after, o.valid_until, o.max_gas_cost)
      IS DISTINCT FROM
      (n.project_id, n.chain_id, n.status, n.sender, n.paymaster, n.valid_after, n.valid_until, n.max_gas_cost));
  IF cardinality(v_changed) = 0 THEN
    RETURN NULL;
  END IF;
  -- By the old status and the id: the table's key (migration 021).
  DELETE FROM sponsorship_status_index x USING old_rows o
    WHERE o.id = ANY (v_changed) AND x.status = o.status AND x.sponsorship_id = o.id;
  INSERT INTO sponsorship_status_index (sponsorship_id, project_id, chain_id, status, sender, paymaster,
      valid_after, valid_until, max_gas_cost)
    SELECT n.id, n.project_id, n.chain_id, n.status, n.sender, n.paymaster, n.valid_after, n.valid_until,
        n.max_gas_cost
      FROM new_rows n WHERE n.id = ANY (v_changed) AND n.status <> 'success';
  INSERT INTO open_reservations AS t (project_id, chain_id, paymaster, reserved_wei)
    SELECT m.project_id, m.chain_id, m.paymaster, sum(m.wei) FROM (
        SELECT o.project_id, o.chain_id, coalesce(o.paymaster, '') AS paymaster, -o.max_gas_cost AS wei
          FROM old_rows o WHERE o.id = ANY (v_changed) AND o.status = 'pending'
        UNION ALL
        SELECT n.project_id, n.chain_id, coalesce(n.paymaster, ''), n.max_gas_cost
          FROM new_rows n WHERE n.id = ANY (v_changed) AND n.status = 'pending') m
      GROUP BY 1, 2, 3 HAVING sum(m.wei) <> 0 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, chain_id, paymaster) DO UPDATE SET reserved_wei = t.reserved_wei + excluded.reserved_wei;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_status_index_update AFTER UPDATE ON sponsorships
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorship_status_index_update();
