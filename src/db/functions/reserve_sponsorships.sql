-- Reservations for one project on one chain, in one statement and one round trip. Concurrent authorizations of a
-- project arrive here together (see ledger/batcher.ts), so the project's row is locked and its
-- commit flushed once per batch: that row is the one thing every authorization of a project must
-- serialise on.
--
-- Each item is decided on its own, in order, under the project's row lock, in the order of
-- DESIGN.md (403 before 402): an idempotent replay; the allowlist, the sender block/allow lists,
-- the campaign, the operation's cost, the per-sender caps; then the tank (never below zero), the
-- daily cap and the project-wide caps. A refusal names its rule (refused_by) and leaves no trace;
-- nothing raises, so one item never undoes another. The grants are written with one INSERT per
-- table, so the statement-level triggers on sponsorships run once per batch; a nonce used twice in
-- one batch is a replay of its first use. With p_dry the same decisions are made and nothing is
-- written or locked: the dry run and the ERC-7677 stub. A project without policies pays one
-- indexed lookup per batch (v_rules stays NULL).
--
-- Every item of a batch is on the same chain (ledger/batcher.ts batches per project and chain;
-- a mixed batch raises). The tank and the daily cap are that chain's alone (migration 035): the
-- home chain's tank is the project's row, another chain's its gas_tanks row, read under the
-- project's row lock, which every move that takes from a tank of the project also holds.
CREATE OR REPLACE FUNCTION reserve_sponsorships(p_project text, p_items jsonb, p_now timestamptz, p_dry boolean DEFAULT false)
RETURNS TABLE (idx integer, outcome text, stored_digest text, stored_response text, call_index integer, refused_by text)
LANGUAGE plpgsql AS $$
DECLARE
  v_balance numeric;
  v_home integer;
  v_chain integer := (p_items -> 0 ->> 'chain_id')::integer;
  v_cap numeric;
  v_spent numeric;
  v_taken numeric := 0;
  v_day date := (p_now AT TIME ZONE 'UTC')::date;
  v_digest text;
  v_response text;
  v_missing integer;
  v_missing_at integer[];
  v_rules policy_rules[];
  r policy_rules;
  v_static text;
  v_static_rule text;
  v_sender_rule policy_rules;
  v_project_rule policy_rules;
  v_subject text;
  v_ws timestamptz;
  v_used numeric;
  v_ops bigint;
  v_reached timestamptz;
  v_alerted smallint;
  v_level smallint;
  v_counted jsonb;
  v_created timestamptz;
  -- The batch's grants, written together after the loop: their items' positions in p_items (idx)
  -- and the policy windows each counted in; and its nonces with the position of their first use,
  -- so that a nonce used twice in one batch is a replay of the first use, as it is across
  -- batches. Arrays, not a growing jsonb: appending to a jsonb copies it whole, which made the
  -- batch quadratic (issue 22: jsonb_concat was a tenth of PostgreSQL's CPU under the bench).
  v_granted integer[] := '{}';
  v_counts jsonb[] := '{}';
  v_nonces text[] := '{}';
  v_nonce_idx integer[] := '{}';
  v_first integer;
  v_seq bigint;
  v_amounts numeric[];
  v_refs text[];
  it record;
BEGIN
  -- One chain, and the items numbered by their place (the allowlist's answers are read by it).
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(p_items) WITH ORDINALITY AS e(item, n)
      WHERE (e.item ->> 'chain_id')::integer IS DISTINCT FROM v_chain
        OR (e.item ->> 'idx')::integer IS DISTINCT FROM e.n - 1) THEN
    RAISE EXCEPTION 'a reservation batch holds one chain, its items numbered 0, 1, 2, ...';
  END IF;
  IF p_dry THEN
    SELECT gas_tank_balance, home_chain_id, daily_cap INTO v_balance, v_home, v_cap FROM projects WHERE id = p_project;
  ELSE
    SELECT gas_tank_balance, home_chain_id, daily_cap, sponsorships_seq INTO v_balance, v_home, v_cap, v_seq
      FROM projects WHERE id = p_project FOR UPDATE;
  END IF;
  IF NOT FOUND THEN
    RETURN QUERY SELECT x.idx, 'insufficient_balance'::text, NULL::text, NULL::text, NULL::integer, NULL::text
      FROM jsonb_to_recordset(p_items) AS x(idx integer);
    RETURN;
  END IF;
  IF v_chain <> v_home THEN
    v_balance := COALESCE((SELECT t.balance FROM gas_tanks t WHERE t.project_id = p_project AND t.chain_id = v_chain), 0);
  END IF;
  SELECT spent INTO v_spent FROM daily_usage WHERE project_id = p_project AND chain_id = v_chain AND day = v_day;
  v_spent := COALESCE(v_spent, 0);
  -- A paused rule refuses nothing (migrations/026_rule_names.sql): it is left out here.
  -- A rule for another chain is left out too; a rule for every chain counts this chain apart.
  SELECT array_agg(pr ORDER BY pr.id) INTO v_rules FROM policy_rules pr
    WHERE pr.project_id = p_project AND NOT pr.paused AND (pr.chain_id IS NULL OR pr.chain_id = v_chain);

  -- Every call must be allowlisted: the first of an item's calls that is not is named in its
  -- refusal. Looked up for the whole batch in one statement, and as one join: every call of the
  -- batch against the project's entries, read once. (A statement per item cost each item an
  -- executor start-up; a subquery per item read the project's entries again for each item, and
  -- in PGlite each of those reads also asked the file system for the table's size: issue 22.)
  -- A call with no entry joins none (a.target_contract IS NULL); an item with no calls keeps its
  -- row (LEFT JOIN LATERAL) and misses nothing. v_missing_at[idx + 1] is item idx's, the items'
  -- idx being 0, 1, 2, ...
  SELECT array_agg(m.missing ORDER BY m.idx) INTO v_missing_at
    FROM (SELECT x.idx, (min(c.ord) FILTER (WHERE a.target_contract IS NULL) - 1)::integer AS missing
          FROM jsonb_to_recordset(p_items) AS x(idx integer, target text, selector text, calls jsonb)
          LEFT JOIN LATERAL ROWS FROM (jsonb_to_recordset(COALESCE(x.calls, jsonb_build_array(jsonb_build_object(
                'target', x.target, 'selector', x.selector)))) AS (target text, selector text))
              WITH ORDINALITY AS c(target, selector, ord) ON true
          LEFT JOIN allowlist_entries a
            ON a.project_id = p_project AND a.target_contract = c.target AND a.function_selector = c.selector
              AND a.enabled AND (a.chain_id = v_chain OR a.chain_id IS NULL)
          GROUP BY x.idx) m;

  FOR it IN SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, nonce text, digest text, auth_id text, key_id bigint, chain_id integer, sender text,
      target text, selector text, gas bigint, cost numeric, max_fee numeric, max_priority_fee numeric,
      paymaster text, valid_after bigint, valid_until bigint, response text, mode text, calls jsonb)
  LOOP
    IF it.nonce IS NOT NULL AND NOT p_dry THEN
      v_first := v_nonce_idx[array_position(v_nonces, it.nonce)];
      IF v_first IS NOT NULL THEN
        idx := it.idx; outcome := 'replay';
        stored_digest := p_items -> v_first ->> 'digest';
        stored_response := p_items -> v_first ->> 'response';
        call_index := NULL; refused_by := NULL;
        RETURN NEXT;
        CONTINUE;
      END IF;
      SELECT rp.request_digest, rp.response, rp.created_at INTO v_digest, v_response, v_created
        FROM sponsorship_replays rp WHERE rp.project_id = p_project AND rp.client_nonce = it.nonce;
      IF FOUND AND v_created >= p_now - interval '24 hours' THEN
        idx := it.idx; outcome := 'replay'; stored_digest := v_digest; stored_response := v_response;
        call_index := NULL; refused_by := NULL;
        RETURN NEXT;
        CONTINUE;
      ELSIF FOUND THEN
        -- A nonce is remembered for 24 hours; after that it is free to be used again (the
        -- retention job forgets old nonces too; this covers the time until it has run).
        DELETE FROM sponsorship_replays WHERE project_id = p_project AND client_nonce = it.nonce;
      END IF;
    END IF;

    v_missing := v_missing_at[it.idx + 1];
    idx := it.idx; stored_digest := NULL; stored_response := NULL; call_index := v_missing; refused_by := NULL;

    -- The policies: the first refusing rule of each group, read without writing anything.
    v_static := NULL; v_static_rule := NULL; v_sender_rule := NULL; v_project_rule := NULL;
    IF v_rules IS NOT NULL THEN
      FOREACH r IN ARRAY v_rules LOOP
        IF v_static IS NULL THEN
          IF r.kind = 'sender_blocklist' AND it.sender = ANY (r.senders) THEN
            v_static := 'sender_blocked'; v_static_rule := r.id;
          ELSIF r.kind = 'sender_allowlist' AND NOT (it.sender = ANY (r.senders)) THEN
            v_static := 'sender_not_allowed'; v_static_rule := r.id;
          ELSIF r.kind = 'campaign' AND ((r.starts_at IS NOT NULL AND p_now < r.starts_at)
              OR (r.ends_at IS NOT NULL AND p_now >= r.ends_at)) THEN
            v_static := 'campaign_not_active'; v_static_rule := r.id;
          ELSIF r.kind = 'operation_cost_cap' AND it.cost > r.max_wei THEN
            v_static := 'operation_cost_exceeded'; v_static_rule := r.id;
          END IF;
        END IF;
        IF r.window_kind IS NOT NULL THEN
          v_subject := CASE WHEN r.kind LIKE 'sender_%' THEN it.sender ELSE '*' END;
          v_ws := policy_window_start(r.window_kind, r.window_seconds, p_now);
          SELECT u.spent, u.ops INTO v_used, v_ops FROM policy_usage u
            WHERE u.project_id = p_project AND u.rule_id = r.id AND u.subject = v_subject
              AND u.chain_id = v_chain AND u.window_start = v_ws;
          IF (r.max_wei IS NOT NULL AND COALESCE(v_used, 0) + it.cost > r.max_wei)
              OR (r.max_operations IS NOT NULL AND COALESCE(v_ops, 0) + 1 > r.max_operations) THEN
            IF v_subject = '*' AND v_project_rule.id IS NULL THEN
              v_project_rule := r;
            ELSIF v_subject <> '*' AND v_sender_rule.id IS NULL THEN
              v_sender_rule := r;
            END IF;
          END IF;
        END IF;
      END LOOP;
    END IF;

    IF v_missing IS NOT NULL THEN
      outcome := 'not_allowlisted';
    ELSIF v_static IS NOT NULL THEN
      outcome := v_static; refused_by := v_static_rule;
    ELSIF v_sender_rule.id IS NOT NULL THEN
      outcome := 'sender_cap_exceeded'; refused_by := v_sender_rule.id;
      IF NOT p_dry THEN PERFORM policy_cap_refused(p_project, v_sender_rule, it.sender, v_chain, p_now); END IF;
    ELSIF v_balance - v_taken < it.cost THEN
      outcome := 'insufficient_balance';
    ELSIF v_cap IS NOT NULL AND v_spent + it.cost > v_cap THEN
      outcome := 'daily_cap_exceeded'; refused_by := 'daily_cap';
    ELSIF v_project_rule.id IS NOT NULL THEN
      outcome := 'project_cap_exceeded'; refused_by := v_project_rule.id;
      IF NOT p_dry THEN PERFORM policy_cap_refused(p_project, v_project_rule, '*', v_chain, p_now); END IF;
    ELSIF p_dry THEN
      outcome := 'reserved';
    ELSE
      v_counted := NULL;
      IF v_rules IS NOT NULL THEN
        FOREACH r IN ARRAY v_rules LOOP
          CONTINUE WHEN r.window_kind IS NULL;
          v_subject := CASE WHEN r.kind LIKE 'sender_%' THEN it.sender ELSE '*' END;
          v_ws := policy_window_start(r.window_kind, r.window_seconds, p_now);
          INSERT INTO policy_usage AS u (project_id, rule_id, subject, chain_id, window_start, spent, ops)
            VALUES (p_project, r.id, v_subject, v_chain, v_ws, it.cost, 1)
            ON CONFLICT (project_id, rule_id, subject, chain_id, window_start)
              DO UPDATE SET spent = u.spent + EXCLUDED.spent, ops = u.ops + 1
            RETURNING u.spent, u.ops, u.reached_at, u.alerted_pct INTO v_used, v_ops, v_reached, v_alerted;
          IF v_reached IS NULL AND (v_used >= r.max_wei OR v_ops >= r.max_operations) THEN
            PERFORM policy_cap_reached(p_project, r, v_subject, v_chain, v_ws, v_used, v_ops, p_now);
          END IF;
          -- A project-wide budget announces 50/75/90/100 % once per window (budget_threshold_emit.sql);
          -- a per-sender cap does not: every player would report their own.
          IF v_subject = '*' THEN
            v_level := GREATEST(budget_level(v_used, r.max_wei), budget_level(v_ops, r.max_operations));
            IF v_level > v_alerted THEN
              UPDATE policy_usage SET alerted_pct = v_level
                WHERE project_id = p_project AND rule_id = r.id AND subject = '*' AND chain_id = v_chain
                  AND window_start = v_ws;
              PERFORM budget_threshold_emit(p_project, r.id, r.kind, r.window_kind, v_ws, r.max_wei,
                r.max_operations, v_used, v_ops, v_level, p_now, v_chain);
            END IF;
          END IF;
          v_counted := COALESCE(v_counted, '[]'::jsonb)
            || jsonb_build_object('rule', r.id, 'subject', v_subject, 'window_start', v_ws);
        END LOOP;
      END IF;
      v_granted := array_append(v_granted, it.idx);
      v_counts := array_append(v_counts, v_counted);
      IF it.nonce IS NOT NULL THEN
        v_nonces := array_append(v_nonces, it.nonce);
        v_nonce_idx := array_append(v_nonce_idx, it.idx);
      END IF;
      v_taken := v_taken + it.cost;
      v_spent := v_spent + it.cost;
      outcome := 'reserved';
    END IF;
    RETURN NEXT;
  END LOOP;

  -- One statement each for the batch's authorizations and ledger entries: the statement-level
  -- triggers on sponsorships (rollups, the sponsored event) then run once per batch.
  IF cardinality(v_granted) > 0 THEN
    -- The grants, and from what they wrote the batch's `reserve` entries (in seq order, which is
    -- the items' order).
    WITH granted AS (
      INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
          estimated_gas, max_gas_cost, max_fee_per_gas, max_priority_fee_per_gas, paymaster,
          valid_after, valid_until, created_at, mode, calls, policy_usage, seq)
        SELECT decode(substr(g.auth_id, 3), 'hex'), p_project, g.key_id, g.chain_id, g.sender, g.target, g.selector,
            g.gas, g.cost, g.max_fee, g.max_priority_fee, g.paymaster,
            g.valid_after, g.valid_until, p_now,
            COALESCE(g.mode, 'call'), g.calls, c.counted, v_seq + c.nth
          FROM unnest(v_granted, v_counts) WITH ORDINALITY AS c(idx, counted, nth)
          JOIN jsonb_to_recordset(p_items) AS g(idx integer, auth_id text,
            key_id bigint, chain_id integer, sender text, target text, selector text, gas bigint,
            cost numeric, max_fee numeric, max_priority_fee numeric, paymaster text, valid_after bigint,
            valid_until bigint, mode text, calls jsonb) ON g.idx = c.idx
          ORDER BY c.nth
        RETURNING auth_id, max_gas_cost, seq)
    SELECT array_agg(-g.max_gas_cost ORDER BY g.seq), array_agg('0x' || encode(g.auth_id, 'hex') ORDER BY g.seq)
      INTO v_amounts, v_refs
      FROM granted g;
    IF cardinality(v_nonces) > 0 THEN
      INSERT INTO sponsorship_replays (project_id, client_nonce, auth_id, request_digest, response, created_at)
        SELECT p_project, g.nonce, g.auth_id, g.digest, g.response, p_now
          FROM unnest(v_nonce_idx) AS c(idx)
          JOIN jsonb_to_recordset(p_items) AS g(idx integer, nonce text, auth_id text, digest text, response text)
            ON g.idx = c.idx;
    END IF;
    -- Through the ledger's one writer: the entries and the balance they take. Each grant's entry
    -- is new: an authorization id already reserved is refused as its unique index on sponsorships
    -- refused it until migration 048 (the ledger's key on the reference is what keeps ids unique).
    IF ledger_move(p_project, v_chain, 'reserve', v_amounts, v_refs) <> cardinality(v_granted) THEN
      RAISE EXCEPTION 'an authorization id is already reserved' USING ERRCODE = 'unique_violation';
    END IF;
    UPDATE projects SET sponsorships_seq = v_seq + cardinality(v_granted) WHERE id = p_project;
  END IF;

  IF v_taken > 0 THEN
    PERFORM daily_usage_adjust(p_project, v_chain, v_day, v_taken);
  END IF;
END $$;
