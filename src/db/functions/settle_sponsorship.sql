-- A paid operation's charge to its sponsorship, in one call (ledger/ledger.ts billOperation decides
-- the amounts; this writes them): the sponsorship marked settled with what was billed, the tank's
-- entry through ledger_move, the day's cap count and the policy windows adjusted. The settlement
-- watcher records every operation in a transaction of its own, and these were four statements of
-- it, each a round trip: 100 operations a second on PostgreSQL, about 10 ms each, most of it the
-- statements' own cost on both sides (2026-11-30, this machine).
--
-- p_kind and p_amount are the ledger entry ('settle' gives back the unused part of the
-- reservation; 'late_settle' takes from the tank after a release); p_daily_delta is what the
-- day's count moves by (negative gives back); p_policy_spent and p_policy_ops what goes back to the
-- policy windows (negative counts again). The caller holds the sponsorship's row lock.
CREATE OR REPLACE FUNCTION settle_sponsorship(
  p_auth_id text, p_outcome text, p_gas_used numeric, p_billed numeric, p_tx_hash text, p_user_op_hash text,
  p_project text, p_chain integer, p_kind text, p_amount numeric, p_day date, p_daily_delta numeric,
  p_policy_spent numeric, p_policy_ops bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_auth bytea := decode(substr(p_auth_id, 3), 'hex');
BEGIN
  -- Through the index on the id's first 64 bits (migration 048, db/bytes.ts authIdKey).
  UPDATE sponsorships SET status = p_outcome, actual_gas = p_gas_used, actual_gas_cost = p_billed,
      tx_hash = decode(substr(p_tx_hash, 3), 'hex'), user_op_hash = decode(substr(p_user_op_hash, 3), 'hex'),
      settled_at = now()
    WHERE ('x' || encode(substr(auth_id, 1, 8), 'hex'))::bit(64)::bigint
        = ('x' || encode(substr(v_auth, 1, 8), 'hex'))::bit(64)::bigint
      AND auth_id = v_auth;
  PERFORM ledger_move(p_project, p_chain, p_kind, ARRAY[p_amount], ARRAY[p_auth_id]);
  IF p_daily_delta <> 0 THEN
    PERFORM daily_usage_adjust(p_project, p_chain, p_day, p_daily_delta);
  END IF;
  IF p_policy_spent <> 0 OR p_policy_ops <> 0 THEN
    PERFORM policy_usage_adjust(p_auth_id, p_policy_spent, p_policy_ops);
  END IF;
END $$;
