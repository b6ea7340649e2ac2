-- sponsorship_status_index (migration 021) for new sponsorships: every one that is not a success
-- (a reservation is pending), in the statement that inserts it, once per statement; and the
-- pending ones' cost added to open_reservations (migration 054), in key order.
CREATE OR REPLACE FUNCTION sponsorship_status_index_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sponsorship_status_index (sponsorship_id, project_id, chain_id, status, sender, paymaster,
      valid_after, valid_until, max_gas_cost)
    SELECT n.id, n.project_id, n.chain_id, n.status, n.sender, n.paymaster, n.valid_after, n.valid_until,
        n.max_gas_cost
      FROM new_rows n WHERE n.status <> 'success';
  INSERT INTO open_reservations AS t (project_id, chain_id, paymaster, reserved_wei)
    SELECT n.project_id, n.chain_id, coalesce(n.paymaster, ''), sum(n.max_gas_cost)
      FROM new_rows n WHERE n.status = 'pending' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, chain_id, paymaster) DO UPDATE SET reserved_wei = t.reserved_wei + excluded.reserved_wei;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_status_index_insert AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorship_status_index_insert();
