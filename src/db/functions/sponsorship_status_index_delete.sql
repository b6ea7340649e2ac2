-- sponsorship_status_index (migration 021) forgets deleted sponsorships, once per statement, in
-- the statement that deletes them: what its foreign key's ON DELETE CASCADE did until migration
-- 044 dropped the key. A row there has its sponsorship's status (the insert and update triggers
-- keep it so), which leads the table's primary key. A deleted pending one's cost leaves
-- open_reservations (migration 054).
CREATE OR REPLACE FUNCTION sponsorship_status_index_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM sponsorship_status_index x USING old_rows o
    WHERE x.status = o.status AND x.sponsorship_id = o.id;
  INSERT INTO open_reservations AS t (project_id, chain_id, paymaster, reserved_wei)
    SELECT o.project_id, o.chain_id, coalesce(o.paymaster, ''), -sum(o.max_gas_cost)
      FROM old_rows o WHERE o.status = 'pending' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (project_id, chain_id, paymaster) DO UPDATE SET reserved_wei = t.reserved_wei + excluded.reserved_wei;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER sponsorships_status_index_delete AFTER DELETE ON sponsorships
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorship_status_index_delete();
