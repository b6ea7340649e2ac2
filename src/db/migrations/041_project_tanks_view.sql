-- Every gas tank as one row (issue 23): a project's home chain's tank is its own row's
-- gas_tank_balance, its other chains' are gas_tanks rows (migration 035). The readers that list
-- or sum tanks (parity, checkpoints, the balance view, chain parity and deposit coverage) read
-- this view instead of writing the union each time. ledger_move.sql keeps the two apart: a home
-- chain's move never writes gas_tanks, so the join below only guards against a row a later
-- change of home chain would leave behind.
CREATE VIEW project_tanks AS
  SELECT p.id AS project_id, p.home_chain_id AS chain_id, true AS home, p.gas_tank_balance AS balance
  FROM projects p
  UNION ALL
  SELECT g.project_id, g.chain_id, false, g.balance
  FROM gas_tanks g JOIN projects p ON p.id = g.project_id
  WHERE g.chain_id <> p.home_chain_id;
