-- Issue 22: the open reservations of a chain, kept as running sums. The readiness probe of every
-- instance (chains/watchers.ts, every READINESS_INTERVAL_MS) compared the paymasters' deposits
-- with the sum of every pending reservation, read by scanning sponsorship_status_index's pending
-- rows: a scan that grows with the rate of authorizations times how long they stay open (under
-- `npm run bench` it cost PostgreSQL 4-17 µs per authorization, growing through the run).
--
-- One row per project, chain and paymaster, moved by the triggers that keep
-- sponsorship_status_index (db/functions/sponsorship_status_index_*.sql) in the statement that
-- changes a sponsorship, so the probe sums a row per project instead. A row belongs to one project:
-- reservation batches, which hold their project's row lock, never wait on another project's.
-- paymaster is '' for a sponsorship that names none. The operator's parity report
-- (GET /blockchain/chains/:chainId/parity) still sums the pending rows themselves.
CREATE TABLE open_reservations (
  project_id text NOT NULL,
  chain_id integer NOT NULL,
  paymaster text NOT NULL,
  reserved_wei numeric(78, 0) NOT NULL,
  PRIMARY KEY (project_id, chain_id, paymaster)
);

-- BEGIN BACKFILL
INSERT INTO open_reservations (project_id, chain_id, paymaster, reserved_wei)
  SELECT project_id, chain_id, coalesce(paymaster, ''), sum(max_gas_cost)
    FROM sponsorship_status_index WHERE status = 'pending' GROUP BY 1, 2, 3
-- END BACKFILL
;
