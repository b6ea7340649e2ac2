/**
 * The event types a webhook endpoint can subscribe to. Each is written to event_outbox in the
 * transaction of the change it reports (the `*_emit_*` triggers in db/functions/; `cap.reached`
 * by the policies' reservation, db/functions/policy_cap_reached.sql). The README documents each payload.
 */
export const EVENT_TYPES = [
  "sponsorship.sponsored",
  "sponsorship.settled",
  "sponsorship.expired",
  "sponsorship.settlement_reversed",
  "deposit.credited",
  "balance.low",
  "cap.reached",
  "spend.unattributed",
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** Subscribes to every type, including ones added later. */
export const ALL_EVENTS = "*";
