-- The one writer of ledger entries and of the gas tanks' cached balances (issue 21: every money
-- movement in one language). Appends the entries of one kind for one project on one chain, each
-- at most once (a reference already entered for that kind is skipped), and moves that chain's
-- tank by the sum of the entries it appended, in the same statement's transaction. Returns how
-- many it appended. The reservation passes its batch (reserve_sponsorships.sql); settlements,
-- releases, deposits, late charges and reversals pass one entry each (ledger/ledger.ts).
--
-- The tank of the project's home chain is projects.gas_tank_balance; its tank on any other chain
-- is a gas_tanks row, made by the first entry there (migration 035). A NULL chain means the home
-- chain. Either balance has a CHECK (>= 0): a move that would overdraw raises, and nothing of it
-- stays. Callers that take from a tank lock the project's row first, which orders them against
-- the reservations of every chain.
CREATE OR REPLACE FUNCTION ledger_move(p_project text, p_chain integer, p_kind text, p_amounts numeric[], p_references text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_chain integer := p_chain;
  v_count integer;
  v_sum numeric;
BEGIN
  IF v_chain IS NULL THEN
    SELECT home_chain_id INTO v_chain FROM projects WHERE id = p_project;
  END IF;
  WITH added AS (
    INSERT INTO ledger_entries (project_id, chain_id, kind, amount, reference)
      SELECT p_project, v_chain, p_kind, e.amount, e.reference
        FROM unnest(p_amounts, p_references) WITH ORDINALITY AS e(amount, reference, ord)
        ORDER BY e.ord
      -- The unique key is a digest of the pair (migration 029).
      ON CONFLICT ((md5(kind || E'\n' || reference)::uuid)) DO NOTHING
      RETURNING amount)
  SELECT count(*)::integer, COALESCE(sum(amount), 0) INTO v_count, v_sum FROM added;
  IF v_count > 0 THEN
    UPDATE projects SET gas_tank_balance = gas_tank_balance + v_sum
      WHERE id = p_project AND home_chain_id = v_chain;
    IF NOT FOUND THEN
      -- Update first: an INSERT ... ON CONFLICT checks the row it proposes, which for a move that
      -- takes from the tank is negative. Only a tank's first entry inserts (a credit; a first entry
      -- that takes is an overdraft, refused by the CHECK).
      UPDATE gas_tanks SET balance = balance + v_sum WHERE project_id = p_project AND chain_id = v_chain;
      IF NOT FOUND THEN
        INSERT INTO gas_tanks AS t (project_id, chain_id, balance) VALUES (p_project, v_chain, v_sum)
          ON CONFLICT (project_id, chain_id) DO UPDATE SET balance = t.balance + EXCLUDED.balance;
      END IF;
    END IF;
  END IF;
  RETURN v_count;
END $$;
