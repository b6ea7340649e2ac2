-- Sponsorship policies (issue 11): per-project rules enforced inside the reservation, with usage
-- counters that the reservation reads and writes under the project's row lock, so that every cap
-- is exact across concurrent requests and instances.

-- One rule of a project, identified by a client-chosen id (named in refusals). Which columns a
-- kind uses is checked here as well as by the API (src/policies/rules.ts).
CREATE TABLE policy_rules (
  project_id text NOT NULL REFERENCES projects (id),
  id text NOT NULL CHECK (id ~ '^[a-z0-9_-]{1,64}$'),
  kind text NOT NULL CHECK (kind IN ('sender_spend_cap', 'sender_count_cap', 'project_spend_cap',
    'project_count_cap', 'operation_cost_cap', 'campaign', 'sender_allowlist', 'sender_blocklist')),
  max_wei numeric(78, 0) CHECK (max_wei >= 0),
  max_operations bigint CHECK (max_operations >= 0),
  -- The counting window of a cap: a UTC calendar day, ISO week (from Monday) or month; fixed
  -- intervals of window_seconds counted from the Unix epoch; or the rule's whole life.
  window_kind text CHECK (window_kind IN ('day', 'week', 'month', 'interval', 'lifetime')),
  window_seconds integer CHECK (window_seconds BETWEEN 60 AND 31622400),
  starts_at timestamptz,
  ends_at timestamptz,
  senders text[] CHECK (cardinality(senders) <= 1000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, id),
  CHECK ((window_kind = 'interval') = (window_seconds IS NOT NULL)),
  CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at),
  CHECK (CASE kind
    WHEN 'sender_spend_cap' THEN max_wei IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'project_spend_cap' THEN max_wei IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'sender_count_cap' THEN max_operations IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'project_count_cap' THEN max_operations IS NOT NULL AND window_kind IS NOT NULL
    WHEN 'operation_cost_cap' THEN max_wei IS NOT NULL
    WHEN 'campaign' THEN starts_at IS NOT NULL OR ends_at IS NOT NULL
    ELSE senders IS NOT NULL
  END)
);

-- What a cap has counted in one window: for one sender, or '*' for the whole project. Both the
-- spend (wei, reservations at maxGasCost less what settlement and release gave back) and the
-- operations are kept whatever the rule's kind. `reached_at` marks the window whose cap was
-- reached, so that `cap.reached` is emitted once per (rule, subject, window).
CREATE TABLE policy_usage (
  project_id text NOT NULL,
  rule_id text NOT NULL,
  subject text NOT NULL,
  window_start timestamptz NOT NULL,
  spent numeric(78, 0) NOT NULL DEFAULT 0 CHECK (spent >= 0),
  ops bigint NOT NULL DEFAULT 0 CHECK (ops >= 0),
  reached_at timestamptz,
  PRIMARY KEY (project_id, rule_id, subject, window_start),
  FOREIGN KEY (project_id, rule_id) REFERENCES policy_rules (project_id, id) ON DELETE CASCADE
);

-- The windows a reservation was counted in ([{rule, subject, window_start}]), so that settlement
-- and release give back into the same windows. NULL when the project had no caps.
ALTER TABLE sponsorships ADD COLUMN policy_usage jsonb;

-- The start of the window that `p_now` falls in.
CREATE FUNCTION policy_window_start(p_kind text, p_seconds integer, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_kind
    WHEN 'day' THEN date_trunc('day', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'week' THEN date_trunc('week', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'month' THEN date_trunc('month', p_now AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    WHEN 'interval' THEN to_timestamp(floor(extract(epoch FROM p_now) / p_seconds) * p_seconds)
    ELSE 'epoch'::timestamptz
  END
$$;

-- Gives back to the windows an authorization was counted in: `p_spent` wei and `p_ops`
-- operations (negative amounts count again, for an operation charged after its release).
CREATE FUNCTION policy_usage_adjust(p_auth_id text, p_spent numeric, p_ops bigint) RETURNS void
LANGUAGE sql AS $$
  UPDATE policy_usage u
    SET spent = GREATEST(u.spent - p_spent, 0), ops = GREATEST(u.ops - p_ops, 0)
  FROM sponsorships s, jsonb_to_recordset(s.policy_usage) AS c(rule text, subject text, window_start timestamptz)
  WHERE s.auth_id = p_auth_id AND s.policy_usage IS NOT NULL
    AND u.project_id = s.project_id AND u.rule_id = c.rule AND u.subject = c.subject
    AND u.window_start = c.window_start;
$$;

-- Reservations for one project in one statement (replaces 006's function). New: the project's
-- policies are checked for every item under the same row lock, in the order of DESIGN.md (403
-- before 402): the allowlist, the sender block/allow lists, the campaign, the operation's cost,
-- the per-sender caps, then the tank, the daily cap and the project-wide caps. A refusal names
-- its rule (refused_by). With p_dry the same decisions are made and nothing is written or locked:
-- the dry run and the ERC-7677 stub.
--
-- A project without policies pays one indexed lookup per batch (v_rules stays NULL).
DROP FUNCTION reserve_sponsorships(text, jsonb, timestamptz);
CREATE FUNCTION reserve_sponsorships(p_project text, p_items jsonb, p_now timestamptz, p_dry boolean DEFAULT false)
RETURNS TABLE (idx integer, outcome text, stored_digest text, stored_response text, call_index integer, refused_by text)
LANGUAGE plpgsql AS $$
DECLARE
  v_balance numeric;
  v_cap numeric;
  v_spent numeric;
  v_taken numeric := 0;
  v_day date := (p_now AT TIME ZONE 'UTC')::date;
  v_digest text;
  v_response text;
  v_missing integer;
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
  v_counted jsonb;
  it record;
BEGIN
  IF p_dry THEN
    SELECT gas_tank_balance, daily_cap INTO v_balance, v_cap FROM projects WHERE id = p_project;
  ELSE
    SELECT gas_tank_balance, daily_cap INTO v_balance, v_cap FROM projects WHERE id = p_project FOR UPDATE;
  END IF;
  IF NOT FOUND THEN
    RETURN QUERY SELECT x.idx, 'insufficient_balance'::text, NULL::text, NULL::text, NULL::integer, NULL::text
      FROM jsonb_to_recordset(p_items) AS x(idx integer);
    RETURN;
  END IF;
  SELECT spent INTO v_spent FROM daily_usage WHERE project_id = p_project AND day = v_day;
  v_spent := COALESCE(v_spent, 0);
  SELECT array_agg(pr ORDER BY pr.id) INTO v_rules FROM policy_rules pr WHERE pr.project_id = p_project;

  FOR it IN SELECT * FROM jsonb_to_recordset(p_items) AS x(
      idx integer, nonce text, digest text, auth_id text, key_id bigint, chain_id integer, sender text,
      target text, selector text, gas bigint, cost numeric, max_fee numeric, max_priority_fee numeric,
      paymaster text, valid_after bigint, valid_until bigint, response text, mode text, calls jsonb)
  LOOP
    IF it.nonce IS NOT NULL AND NOT p_dry THEN
      -- A nonce is remembered for 24 hours; after that it is free to be used again.
      UPDATE sponsorships SET client_nonce = NULL
        WHERE project_id = p_project AND client_nonce = it.nonce AND created_at < p_now - interval '24 hours';
      SELECT s.request_digest, s.response INTO v_digest, v_response FROM sponsorships s
        WHERE s.project_id = p_project AND s.client_nonce = it.nonce;
      IF FOUND THEN
        idx := it.idx; outcome := 'replay'; stored_digest := v_digest; stored_response := v_response;
        call_index := NULL; refused_by := NULL;
        RETURN NEXT;
        CONTINUE;
      END IF;
    END IF;

    -- Every call must be allowlisted: the first one that is not is named in the refusal.
    SELECT min(c.ord - 1)::integer INTO v_missing
      FROM ROWS FROM (jsonb_to_recordset(COALESCE(it.calls, jsonb_build_array(jsonb_build_object(
          'target', it.target, 'selector', it.selector)))) AS (target text, selector text))
        WITH ORDINALITY AS c(target, selector, ord)
      WHERE NOT EXISTS (SELECT 1 FROM allowlist_entries a
        WHERE a.project_id = p_project AND a.target_contract = c.target AND a.function_selector = c.selector
          AND a.enabled);
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
            WHERE u.project_id = p_project AND u.rule_id = r.id AND u.subject = v_subject AND u.window_start = v_ws;
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
      IF NOT p_dry THEN PERFORM policy_cap_refused(p_project, v_sender_rule, it.sender, p_now); END IF;
    ELSIF v_balance - v_taken < it.cost THEN
      outcome := 'insufficient_balance';
    ELSIF v_cap IS NOT NULL AND v_spent + it.cost > v_cap THEN
      outcome := 'daily_cap_exceeded'; refused_by := 'daily_cap';
    ELSIF v_project_rule.id IS NOT NULL THEN
      outcome := 'project_cap_exceeded'; refused_by := v_project_rule.id;
      IF NOT p_dry THEN PERFORM policy_cap_refused(p_project, v_project_rule, '*', p_now); END IF;
    ELSIF p_dry THEN
      outcome := 'reserved';
    ELSE
      v_counted := NULL;
      IF v_rules IS NOT NULL THEN
        FOREACH r IN ARRAY v_rules LOOP
          CONTINUE WHEN r.window_kind IS NULL;
          v_subject := CASE WHEN r.kind LIKE 'sender_%' THEN it.sender ELSE '*' END;
          v_ws := policy_window_start(r.window_kind, r.window_seconds, p_now);
          INSERT INTO policy_usage AS u (project_id, rule_id, subject, window_start, spent, ops)
            VALUES (p_project, r.id, v_subject, v_ws, it.cost, 1)
            ON CONFLICT (project_id, rule_id, subject, window_start)
              DO UPDATE SET spent = u.spent + EXCLUDED.spent, ops = u.ops + 1
            RETURNING u.spent, u.ops, u.reached_at INTO v_used, v_ops, v_reached;
          IF v_reached IS NULL AND (v_used >= r.max_wei OR v_ops >= r.max_operations) THEN
            PERFORM policy_cap_reached(p_project, r, v_subject, v_ws, v_used, v_ops, p_now);
          END IF;
          v_counted := COALESCE(v_counted, '[]'::jsonb)
            || jsonb_build_object('rule', r.id, 'subject', v_subject, 'window_start', v_ws);
        END LOOP;
      END IF;
      INSERT INTO sponsorships (auth_id, project_id, api_key_id, chain_id, sender, target, selector,
          estimated_gas, max_gas_cost, max_fee_per_gas, max_priority_fee_per_gas, paymaster,
          valid_after, valid_until, client_nonce, request_digest, response, created_at, mode, calls,
          policy_usage)
        VALUES (it.auth_id, p_project, it.key_id, it.chain_id, it.sender, it.target, it.selector,
          it.gas, it.cost, it.max_fee, it.max_priority_fee, it.paymaster,
          it.valid_after, it.valid_until, it.nonce, it.digest, it.response, p_now,
          COALESCE(it.mode, 'call'), it.calls, v_counted);
      INSERT INTO ledger_entries (project_id, kind, amount, reference) VALUES (p_project, 'reserve', -it.cost, it.auth_id);
      v_taken := v_taken + it.cost;
      v_spent := v_spent + it.cost;
      outcome := 'reserved';
    END IF;
    RETURN NEXT;
  END LOOP;

  IF v_taken > 0 THEN
    UPDATE projects SET gas_tank_balance = gas_tank_balance - v_taken WHERE id = p_project;
    INSERT INTO daily_usage AS u (project_id, day, spent) VALUES (p_project, v_day, v_taken)
      ON CONFLICT (project_id, day) DO UPDATE SET spent = u.spent + EXCLUDED.spent;
  END IF;
END $$;

-- `cap.reached`, once per (rule, subject, window): the window's row is marked when it is emitted.
CREATE FUNCTION policy_cap_reached(p_project text, r policy_rules, p_subject text, p_ws timestamptz,
    p_spent numeric, p_ops bigint, p_now timestamptz) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE policy_usage SET reached_at = p_now
    WHERE project_id = p_project AND rule_id = r.id AND subject = p_subject AND window_start = p_ws
      AND reached_at IS NULL;
  IF FOUND THEN
    PERFORM emit_event(p_project, 'cap.reached', jsonb_build_object(
      'ruleId', r.id, 'kind', r.kind,
      'sender', CASE WHEN p_subject = '*' THEN NULL ELSE p_subject END,
      'window', r.window_kind, 'windowSeconds', r.window_seconds,
      'windowStart', to_char(p_ws AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
      'maxWei', r.max_wei::text, 'maxOperations', r.max_operations,
      'spentWei', p_spent::text, 'operations', p_ops,
      'at', to_char(p_now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  END IF;
END $$;

-- A cap refused an operation: its window counts as reached (a spend cap is rarely met to the
-- wei), with the usage it has.
CREATE FUNCTION policy_cap_refused(p_project text, r policy_rules, p_subject text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_ws timestamptz := policy_window_start(r.window_kind, r.window_seconds, p_now);
  v_spent numeric;
  v_ops bigint;
BEGIN
  INSERT INTO policy_usage AS u (project_id, rule_id, subject, window_start)
    VALUES (p_project, r.id, p_subject, v_ws)
    ON CONFLICT (project_id, rule_id, subject, window_start) DO UPDATE SET spent = u.spent
    RETURNING u.spent, u.ops INTO v_spent, v_ops;
  PERFORM policy_cap_reached(p_project, r, p_subject, v_ws, v_spent, v_ops, p_now);
END $$;
