-- A paid operation's charge to its sponsorship, in one call (ledger/ledger.ts billOperation decides
-- the amounts; this writes them): the sponsorship marked settled with what was billed, the tank's
-- entry through ledger_move, the day's cap count and the policy windows adjusted. The settlement
-- watcher records every operation in a transaction of its own, and these were four statements of
-- it, each a round trip: 100 operations a second on PostgreSQL, about 10 ms each, most of it the
-- statements' own cost on both sides (2026-11-30, this machine).
--
-- p_kind and p_amount are the ledger entry: 'settle' gives the unused part of the reservation back
-- to the tank (positive), 'late_settle' takes the charge from it after a release (negative). The
-- day's count and the policy windows' spend move with the tank, by the same amount the other way:
-- what the tank gets back they no longer count. p_policy_ops is what goes back to the windows'
-- operation counts (0 for a settlement, -1 counts a late charge again). The caller holds the
-- sponsorship's row lock.
--
-- The first version (same day) also took the day's delta and the policy spend, always -p_amount
-- and p_amount: dropped, so that a database that applied it keeps one function of this name.
DROP FUNCTION IF EXISTS settle_sponsorship(text, text, numeric, numeric, text, text, text, integer, text, numeric,
  date, numeric, numeric, bigint);

CREATE OR REPLACE FUNCTION settle_sponsorship(
  p_auth_id text, p_outcome text, p_gas_used numeric, p_billed numeric, p_tx_hash text, p_user_op_hash text,
  p_project text, p_chain integer, p_kind text, p_amount numeric, p_day date, p_policy_ops bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_auth bytea := decode(substr(p_auth_id, 3), 'hex');
BEGIN
  -- Through the index on the id's first 64 bits (auth_id_key.sql).
  UPDATE sponsorships SET status = p_outcome, actual_gas = p_gas_used, actual_gas_cost = p_billed,
      tx_hash = decode(substr(p_tx_hash, 3), 'hex'), user_op_hash = decode(substr(p_user_op_hash, 3), 'hex'),
      settled_at = now()
    WHERE auth_id_key(auth_id) = auth_id_key(v_auth) AND auth_id = v_auth;
  PERFORM ledger_move(p_project, p_chain, p_kind, ARRAY[p_amount], ARRAY[p_auth_id]);
  IF p_amount <> 0 THEN
    PERFORM daily_usage_adjust(p_project, p_chain, p_day, -p_amount);
  END IF;
  IF p_amount <> 0 OR p_policy_ops <> 0 THEN
    PERFORM policy_usage_adjust(p_auth_id, p_amount, p_policy_ops);
  END IF;
END $$;
