/**
 * The registry of webhook event types: each type with what it reports and the type of its
 * payload. Everything else derives from it: the event types an endpoint may subscribe to (the
 * route schema), `GET /webhooks/event-types` (which the dashboard reads), and the tests that hold
 * the SQL to it (test/webhook-events.test.ts: every type is emitted by the database and nowhere
 * else, with exactly the keys its payload type names; every event any test app writes is checked
 * against its type when the app closes).
 *
 * Each event is written to event_outbox in the transaction of the change it reports, by the
 * `*_emit_*` triggers in db/functions/ (`cap.reached` by the policies' reservation,
 * db/functions/policy_cap_reached.sql; `budget.threshold` by the reservation and the daily
 * count, db/functions/budget_threshold_emit.sql; a threshold raised above the balance by
 * webhooks/store.ts).
 *
 * Adding a type: an entry here, the SQL that emits it, and its row in the README's table (the
 * test holds the README's type, description and keys to this file).
 */
import { type Static, type TObject, type TSchema, Type } from "@sinclair/typebox";

const Wei = Type.String({ pattern: "^[0-9]+$", description: "wei, as a decimal string" });
const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });
const Hash = Type.String({ pattern: "^0x[0-9a-fA-F]{64}$" });
const Selector = Type.String({ pattern: "^0x[0-9a-fA-F]{8}$" });
const Instant = Type.String({ format: "date-time" });
const ChainId = Type.Integer({ minimum: 1 });
const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const payload = <P extends Record<string, TSchema>>(properties: P) =>
  Type.Object(properties, { additionalProperties: false });

/** What every status event of a sponsorship carries. */
const sponsorshipKeys = {
  authorizationId: Hash,
  chainId: ChainId,
  sender: Address,
  maxGasCost: Wei,
};

export const EVENTS = {
  "sponsorship.sponsored": {
    description: "an authorization reserved funds (REST or ERC-7677)",
    payload: payload({
      authorizationId: Hash,
      chainId: ChainId,
      mode: Type.Union([Type.Literal("call"), Type.Literal("operation")]),
      sender: Address,
      target: Nullable(Address),
      selector: Nullable(Selector),
      calls: Type.Array(Type.Object({ target: Nullable(Address), selector: Nullable(Selector) })),
      maxTotalGas: Wei,
      maxGasCost: Wei,
      validAfter: Type.Integer(),
      validUntil: Type.Integer(),
      sponsoredAt: Instant,
    }),
  },
  "sponsorship.settled": {
    description: "the operation was final on chain; the tank was charged its actual cost",
    payload: payload({
      ...sponsorshipKeys,
      outcome: Type.Union([Type.Literal("success"), Type.Literal("reverted")]),
      actualGas: Wei,
      actualGasCost: Wei,
      txHash: Nullable(Hash),
      userOpHash: Nullable(Hash),
      late: Type.Boolean({
        description: "charged after the reservation had been released (deep reorganisation)",
      }),
    }),
  },
  "sponsorship.expired": {
    description: "the window ended with no operation; the reservation was released",
    payload: payload({ ...sponsorshipKeys, releasedWei: Wei }),
  },
  "sponsorship.settlement_reversed": {
    description: "a reorganisation removed the block that settled it; the charge was given back",
    payload: payload({
      ...sponsorshipKeys,
      previousOutcome: Type.Union([Type.Literal("success"), Type.Literal("reverted")]),
      reversedWei: Wei,
    }),
  },
  "deposit.credited": {
    description: "a deposit reached the confirmation depth and was credited",
    payload: payload({
      reference: Type.String(),
      amount: Wei,
      chainId: ChainId,
      txHash: Nullable(Hash),
      creditedAt: Instant,
    }),
  },
  "balance.low": {
    description:
      "the tank fell below the project's threshold: once per crossing (it must rise to the threshold or above before it can fire again)",
    payload: payload({ chainId: ChainId, balance: Wei, threshold: Wei }),
  },
  "cap.reached": {
    description: "a policy cap reached its limit, or first refused, in a window",
    payload: payload({
      ruleId: Type.String(),
      kind: Type.String(),
      chainId: ChainId,
      sender: Nullable(Address),
      window: Nullable(Type.String()),
      windowSeconds: Nullable(Type.Integer()),
      windowStart: Instant,
      maxWei: Nullable(Wei),
      maxOperations: Nullable(Type.Integer()),
      spentWei: Wei,
      operations: Type.Integer(),
      at: Instant,
    }),
  },
  "budget.threshold": {
    description:
      "a project-wide budget (the daily cap, a project spend or count cap) was used to 50, 75, 90 or 100 %: each level once per window",
    payload: payload({
      ruleId: Type.String({ description: "daily_cap, or the policy rule's id" }),
      kind: Type.String(),
      chainId: ChainId,
      percent: Type.Union([50, 75, 90, 100].map((n) => Type.Literal(n))),
      window: Nullable(Type.String()),
      windowStart: Instant,
      maxWei: Nullable(Wei),
      maxOperations: Nullable(Type.Integer()),
      spentWei: Wei,
      operations: Nullable(Type.Integer()),
      at: Instant,
    }),
  },
  "spend.unattributed": {
    description:
      "the paymaster paid for an operation of this project that its tank was not (fully) charged for",
    payload: payload({
      chainId: ChainId,
      txHash: Hash,
      userOpHash: Hash,
      authorizationId: Nullable(Hash),
      sender: Address,
      actualGasCost: Wei,
      billed: Wei,
      unattributed: Wei,
      reason: Type.String(),
    }),
  },
} satisfies Record<string, { description: string; payload: TObject }>;

export type EventType = keyof typeof EVENTS;
export const EVENT_TYPES = Object.keys(EVENTS) as EventType[];
export type EventPayload<T extends EventType> = Static<(typeof EVENTS)[T]["payload"]>;

/** Subscribes to every type, including ones added later. */
export const ALL_EVENTS = "*";
