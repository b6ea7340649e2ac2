-- The one writer of ledger entries and of a tank's cached balance (issue 21: every money movement
-- in one language). Appends the entries of one kind for one project, each at most once (a
-- reference already entered for that kind is skipped), and moves the cached balance by the sum
-- of the entries it appended, in the same statement's transaction. Returns how many it appended.
-- The reservation passes its batch (reserve_sponsorships.sql); settlements, releases, deposits,
-- late charges and reversals pass one entry each (ledger/ledger.ts).
CREATE OR REPLACE FUNCTION ledger_move(p_project text, p_kind text, p_amounts numeric[], p_references text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
  v_sum numeric;
BEGIN
  WITH added AS (
    INSERT INTO ledger_entries (project_id, kind, amount, reference)
      SELECT p_project, p_kind, e.amount, e.reference
        FROM unnest(p_amounts, p_references) WITH ORDINALITY AS e(amount, reference, ord)
        ORDER BY e.ord
      -- The unique key is a digest of the pair (migration 029).
      ON CONFLICT ((md5(kind || E'\n' || reference)::uuid)) DO NOTHING
      RETURNING amount)
  SELECT count(*)::integer, COALESCE(sum(amount), 0) INTO v_count, v_sum FROM added;
  IF v_count > 0 THEN
    UPDATE projects SET gas_tank_balance = gas_tank_balance + v_sum WHERE id = p_project;
  END IF;
  RETURN v_count;
END $$;
