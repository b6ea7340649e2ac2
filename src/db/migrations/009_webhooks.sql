-- Webhooks (issue 11): a project's event endpoints, its approval webhook and low-balance alert,
-- and the delivery of event_outbox (007) to the endpoints. Written only by src/webhooks/.
--
-- Events are written by triggers on the tables that record the changes, so each one commits in
-- the same transaction as its change whatever code path made it (the reservation function,
-- settlement, releases, deposit credits). A trigger writes an event only when at least one
-- enabled endpoint of the project subscribes to its type: a project without webhooks pays one
-- index probe per statement. Events written with emit_event by other modules (cap.reached) are
-- kept whether or not anyone subscribes. Fan-out to endpoints happens in the same transaction as
-- the event (a trigger on event_outbox), so the delivery worker only ever reads
-- webhook_deliveries and needs no cursor over event ids that commit out of order.

-- The signing secrets are stored as they are: the service has to compute HMACs with them, so a
-- digest cannot do. They leave the database only in the response that created them.
CREATE TABLE webhook_endpoints (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  project_id text NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  url text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
  event_types text[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 32),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 256),
  secret text NOT NULL CHECK (secret ~ '^whsec_'),
  -- After a rotation the previous secret keeps signing beside the new one until this time, so
  -- receivers can switch without dropping deliveries.
  previous_secret text CHECK (previous_secret ~ '^whsec_'),
  previous_secret_until timestamptz,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL))
);
CREATE INDEX webhook_endpoints_by_project ON webhook_endpoints (project_id, id);

-- Per-project settings of this module: the low-balance alert and the approval webhook.
CREATE TABLE project_webhook_settings (
  project_id text PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
  low_balance_threshold numeric(78, 0) CHECK (low_balance_threshold > 0),
  approval_url text CHECK (approval_url ~ '^https?://' AND length(approval_url) <= 2048),
  approval_secret text CHECK (approval_secret ~ '^whsec_'),
  approval_timeout_ms integer NOT NULL DEFAULT 2000 CHECK (approval_timeout_ms BETWEEN 50 AND 5000),
  approval_fail_mode text NOT NULL DEFAULT 'closed' CHECK (approval_fail_mode IN ('open', 'closed')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((approval_url IS NULL) = (approval_secret IS NULL))
);

-- One row per (endpoint, event): the unit of at-least-once delivery. A claimed row's
-- next_attempt_at is pushed past the attempt's timeout (a lease), so a worker that dies mid-attempt
-- leaves the row to be claimed again once the lease runs out.
CREATE TABLE webhook_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id bigint NOT NULL REFERENCES event_outbox (id) ON DELETE CASCADE,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_status_code integer,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  UNIQUE (endpoint_id, event_id),
  CHECK ((status = 'pending') = (completed_at IS NULL))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries (event_id);

-- The delivery log: one row per HTTP attempt.
CREATE TABLE webhook_attempts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt integer NOT NULL CHECK (attempt >= 1),
  started_at timestamptz NOT NULL,
  latency_ms integer NOT NULL CHECK (latency_ms >= 0),
  status_code integer,
  error text CHECK (length(error) <= 500),
  -- When the next attempt is due; NULL when this one succeeded or was the last.
  next_attempt_at timestamptz
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);

-- Whether an enabled endpoint of the project wants events of this type ('*' = every type).
CREATE FUNCTION webhook_subscribed(p_project text, p_type text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM webhook_endpoints e
    WHERE e.project_id = p_project AND e.enabled AND (p_type = ANY (e.event_types) OR '*' = ANY (e.event_types)));
$$;

-- Fan-out: every event gets a delivery per subscribed endpoint, in the event's transaction.
CREATE FUNCTION event_outbox_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT e.id, n.id FROM new_events n
    JOIN webhook_endpoints e ON e.project_id = n.project_id AND e.enabled
      AND (n.type = ANY (e.event_types) OR '*' = ANY (e.event_types));
  RETURN NULL;
END $$;
CREATE TRIGGER event_outbox_fan_out AFTER INSERT ON event_outbox
  REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION event_outbox_fan_out();

-- sponsorship.sponsored: statement-level, so a reservation that inserts a batch of
-- authorizations in one statement writes their events in one statement too.
CREATE FUNCTION sponsorships_emit_sponsored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM emit_event(n.project_id, 'sponsorship.sponsored', jsonb_build_object(
      'authorizationId', n.auth_id,
      'chainId', n.chain_id,
      'mode', n.mode,
      'sender', n.sender,
      'target', n.target,
      'selector', n.selector,
      'calls', COALESCE(n.calls, jsonb_build_array(jsonb_build_object('target', n.target, 'selector', n.selector))),
      'maxTotalGas', n.estimated_gas::text,
      'maxGasCost', n.max_gas_cost::text,
      'validAfter', n.valid_after,
      'validUntil', n.valid_until,
      'sponsoredAt', n.created_at))
    FROM (SELECT * FROM new_rows ORDER BY id) n
    WHERE webhook_subscribed(n.project_id, 'sponsorship.sponsored');
  RETURN NULL;
END $$;
CREATE TRIGGER sponsorships_sponsored_event AFTER INSERT ON sponsorships
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sponsorships_emit_sponsored();

-- sponsorship.settled / .expired / .settlement_reversed: row-level with a WHEN clause, so the
-- reservation's own updates of sponsorships (forgetting old nonces) never call it.
CREATE FUNCTION sponsorships_emit_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_type text;
  v_payload jsonb;
BEGIN
  IF NEW.status IN ('success', 'reverted') THEN
    v_type := 'sponsorship.settled';
    v_payload := jsonb_build_object(
      'outcome', NEW.status,
      'actualGas', NEW.actual_gas::text,
      'actualGasCost', NEW.actual_gas_cost::text,
      'txHash', NEW.tx_hash,
      'userOpHash', NEW.user_op_hash,
      -- Charged after the reservation had been released (only after a deep reorganisation).
      'late', OLD.status = 'expired');
  ELSIF OLD.status = 'pending' THEN
    v_type := 'sponsorship.expired';
    v_payload := jsonb_build_object('releasedWei', NEW.max_gas_cost::text);
  ELSE
    -- A reorganisation removed the block that settled it: the charge was given back.
    v_type := 'sponsorship.settlement_reversed';
    v_payload := jsonb_build_object('previousOutcome', OLD.status, 'reversedWei', OLD.actual_gas_cost::text);
  END IF;
  IF webhook_subscribed(NEW.project_id, v_type) THEN
    PERFORM emit_event(NEW.project_id, v_type, v_payload || jsonb_build_object(
      'authorizationId', NEW.auth_id,
      'chainId', NEW.chain_id,
      'sender', NEW.sender,
      'maxGasCost', NEW.max_gas_cost::text));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER sponsorships_status_event AFTER UPDATE OF status ON sponsorships
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sponsorships_emit_status();

-- deposit.credited: only deposit entries call the function (the WHEN clause is evaluated
-- without it), so the reservation's ledger entries cost nothing here.
CREATE FUNCTION ledger_emit_deposit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(NEW.project_id, 'deposit.credited') THEN
    PERFORM emit_event(NEW.project_id, 'deposit.credited', jsonb_build_object(
      'reference', NEW.reference,
      'amount', NEW.amount::text,
      -- Chain deposits are referenced `<chainId>:<txHash>:<position>` (funding/store.ts).
      'chainId', (substring(NEW.reference FROM '^([0-9]{1,9}):0x'))::integer,
      'txHash', substring(NEW.reference FROM '^[0-9]+:(0x[0-9a-f]{64})'),
      'creditedAt', NEW.created_at));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER ledger_deposit_event AFTER INSERT ON ledger_entries
  FOR EACH ROW WHEN (NEW.kind = 'deposit') EXECUTE FUNCTION ledger_emit_deposit();

-- balance.low: once per crossing from at-or-above the threshold to below it. Only decreases call
-- the function; the reservation decreases the balance once per batch.
CREATE FUNCTION projects_emit_low_balance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_threshold numeric;
BEGIN
  SELECT low_balance_threshold INTO v_threshold FROM project_webhook_settings WHERE project_id = NEW.id;
  IF v_threshold IS NOT NULL AND OLD.gas_tank_balance >= v_threshold AND NEW.gas_tank_balance < v_threshold
      AND webhook_subscribed(NEW.id, 'balance.low') THEN
    PERFORM emit_event(NEW.id, 'balance.low', jsonb_build_object(
      'balance', NEW.gas_tank_balance::text,
      'threshold', v_threshold::text));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER projects_low_balance_event AFTER UPDATE OF gas_tank_balance ON projects
  FOR EACH ROW WHEN (NEW.gas_tank_balance < OLD.gas_tank_balance) EXECUTE FUNCTION projects_emit_low_balance();

-- spend.unattributed: the settlement watcher records an operation, then (same transaction)
-- writes what was billed; paid on chain but not (fully) charged to this project's tank. Spend
-- that cannot be tied to any project is the operator's concern (chain parity), not a project's.
CREATE FUNCTION chain_operations_emit_unattributed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF webhook_subscribed(NEW.project_id, 'spend.unattributed') THEN
    PERFORM emit_event(NEW.project_id, 'spend.unattributed', jsonb_build_object(
      'chainId', NEW.chain_id,
      'txHash', NEW.tx_hash,
      'userOpHash', NEW.user_op_hash,
      'authorizationId', NEW.auth_id,
      'sender', NEW.sender,
      'actualGasCost', NEW.actual_gas_cost::text,
      'billed', NEW.billed::text,
      'unattributed', (NEW.actual_gas_cost - NEW.billed)::text,
      'reason', NEW.unbilled_reason));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER chain_operations_unattributed_event AFTER UPDATE ON chain_operations
  FOR EACH ROW WHEN (OLD.unbilled_reason = 'recording' AND NEW.project_id IS NOT NULL
    AND NEW.billed < NEW.actual_gas_cost) EXECUTE FUNCTION chain_operations_emit_unattributed();
