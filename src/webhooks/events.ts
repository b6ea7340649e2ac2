/**
 * The event types a webhook endpoint can subscribe to. Each is written to event_outbox in the
 * transaction of the change it reports (migrations/009_webhooks.sql; `cap.reached` by the
 * policies' reservation, migrations/008). The README documents each payload.
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
