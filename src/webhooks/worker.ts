/**
 * The delivery worker: claims due deliveries (deliveries.ts), POSTs each signed event to its
 * endpoint with a bounded timeout, and records the attempt with what comes next (schedule.ts).
 * Any number of instances may run it against one database; claims never overlap, and a killed
 * instance's claims come back when their lease ends. Delivery is at least once: a receiver
 * de-duplicates on `webhook-id`, the event's id, which every retry and redelivery repeats.
 */

import { type PollLoop, pollLoop, type WatcherLog } from "../chains/poll-loop.ts";
import type { Db } from "../db/db.ts";
import type { Metrics, WebhookAttemptOutcome } from "../metrics/metrics.ts";
import type { Keyring } from "../secrets/envelope.ts";
import { type ClaimedDelivery, claimDue, recordAttempt, releaseClaim } from "./deliveries.ts";
import { NO_PUBLIC_ADDRESS, noPublicAddress, sendFailure, type WebhookFetch } from "./egress.ts";
import { afterFailure, delivered, type RetryPolicy } from "./schedule.ts";
import { signedHeaders } from "./signing.ts";

export interface WorkerOptions {
  retry: RetryPolicy;
  /** Bound on one attempt: connecting, sending, and the receiver's answer. */
  timeoutMs: number;
  /** How often the outbox is polled when there is nothing to do. */
  pollIntervalMs: number;
  /** Deliveries in flight at once per instance. */
  concurrency?: number;
  random?: () => number;
  now?: () => number;
  /** What requests are sent with (webhooks/egress.ts: the guard against private targets). */
  fetch?: WebhookFetch;
  /** Where attempts and deliveries given up on are counted; nothing is counted without it. */
  metrics?: Pick<Metrics, "webhookAttempt" | "webhookGaveUp">;
  /** Opens the endpoints' signing secrets (stored sealed, webhooks/store.ts). */
  keyring: Keyring;
}

export interface WebhookWorker {
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
  /** One pass over what is due (tests drive the worker with it). Returns how many were attempted. */
  drain(): Promise<number>;
}

/** An event as its endpoint receives it. The body is built from the stored row, so every retry sends the same bytes. */
export function eventBody(
  d: Pick<ClaimedDelivery, "eventId" | "type" | "projectId" | "payload" | "createdAt">,
): string {
  return JSON.stringify({
    id: d.eventId,
    type: d.type,
    timestamp: d.createdAt.toISOString(),
    projectId: d.projectId,
    data: d.payload,
  });
}

export function webhookWorker(db: Db, options: WorkerOptions): WebhookWorker {
  const concurrency = options.concurrency ?? 16;
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  const send: WebhookFetch = options.fetch ?? ((url, init) => fetch(url, init));
  // Past the attempt's own timeout, with room to record its result: only a dead instance's
  // claims outlive it.
  const leaseMs = 2 * options.timeoutMs + 1000;
  let log: WatcherLog | undefined;
  // Aborted on stop: requests in flight end at once and their deliveries are handed back.
  let stopping = new AbortController();

  const attempt = async (d: ClaimedDelivery): Promise<void> => {
    if (d.secretProblem !== null) return notSent(d, d.secretProblem);
    const body = eventBody(d);
    const startedAt = new Date(now());
    const headers = signedHeaders(d.secrets, d.eventId, Math.floor(startedAt.getTime() / 1000), body);
    let statusCode: number | null = null;
    let error: string | null = null;
    let outcome: WebhookAttemptOutcome;
    // The metric's clock is monotonic; the log's latency follows `now` like its timestamps.
    const exchangeStarted = performance.now();
    try {
      const res = await send(d.url, {
        method: "POST",
        headers: { ...headers, "user-agent": "gas-sponsorship-webhooks/1" },
        body,
        redirect: "manual",
        signal: AbortSignal.any([AbortSignal.timeout(options.timeoutMs), stopping.signal]),
      });
      statusCode = res.status;
      // The answer's body is not needed; dropping it frees the connection.
      await res.body?.cancel().catch(() => {});
      outcome = delivered(res.status) ? "delivered" : "http_error";
      if (!delivered(res.status)) error = `HTTP ${res.status}`;
    } catch (err) {
      if (stopping.signal.aborted) {
        await releaseClaim(db, d);
        return;
      }
      ({ outcome, error } = describeFailure(err, options.timeoutMs));
    }
    options.metrics?.webhookAttempt(outcome, (performance.now() - exchangeStarted) / 1000);
    const latencyMs = Math.max(0, now() - startedAt.getTime());
    const ok = error === null;
    const after = ok ? null : afterFailure(options.retry, d.attempt, random());
    const next = ok
      ? ({ kind: "succeeded" } as const)
      : after!.kind === "retry"
        ? { kind: "retry" as const, delayMs: after!.delayMs }
        : ({ kind: "failed" } as const);
    const recorded = await recordAttempt(db, d, { startedAt, latencyMs, statusCode, error, next });
    // Counted only when the delivery really ended failed (not when redelivered meanwhile).
    if (next.kind === "failed" && recorded) options.metrics?.webhookGaveUp();
    if (next.kind === "failed") {
      log?.warn(
        { delivery: d.id, event: d.eventId, attempts: d.attempt, error },
        "webhook delivery failed for good",
      );
    }
  };

  /**
   * A delivery whose secret cannot be opened is not sent, and the attempt is logged as failed
   * (on the usual schedule: a key put back into the configuration lets a retry through). The log
   * names the delivery, the endpoint and the reason, never a secret.
   */
  const notSent = async (d: ClaimedDelivery, problem: string): Promise<void> => {
    const error = "not sent: the endpoint's signing secret cannot be decrypted";
    const after = afterFailure(options.retry, d.attempt, random());
    const next =
      after.kind === "retry"
        ? { kind: "retry" as const, delayMs: after.delayMs }
        : { kind: "failed" as const };
    const startedAt = new Date(now());
    const recorded = await recordAttempt(db, d, { startedAt, latencyMs: 0, statusCode: null, error, next });
    if (next.kind === "failed" && recorded) options.metrics?.webhookGaveUp();
    log?.error(
      {
        delivery: d.id,
        endpoint: d.endpointId,
        event: d.eventId,
        attempts: d.attempt,
        problem,
        givenUp: next.kind === "failed",
      },
      "webhook delivery not sent: its endpoint's signing secret cannot be decrypted",
    );
  };

  const drain = async (): Promise<number> => {
    let total = 0;
    while (!stopping.signal.aborted) {
      const claimed = await claimDue(db, concurrency, leaseMs, options.keyring);
      await Promise.all(claimed.map(attempt));
      total += claimed.length;
      if (claimed.length < concurrency) break;
    }
    return total;
  };

  let loop: PollLoop | null = null;
  return {
    start(l) {
      log = l;
      stopping = new AbortController();
      loop = pollLoop(drain, {
        name: "webhooks",
        intervalMs: options.pollIntervalMs,
        maxBackoffMs: 30_000,
        ...(l ? { log: l } : {}),
      });
      loop.start();
    },
    async stop() {
      stopping.abort();
      await loop?.stop();
      loop = null;
    },
    drain,
  };
}

/**
 * A failed request's class for the metrics and a short, safe description for the delivery log
 * (no URL in either: it may carry a token in its path).
 */
function describeFailure(
  err: unknown,
  timeoutMs: number,
): { outcome: Exclude<WebhookAttemptOutcome, "delivered" | "http_error">; error: string } {
  const failure = sendFailure(err);
  switch (failure.kind) {
    case "timeout":
      return { outcome: "timeout", error: `timed out after ${timeoutMs} ms` };
    case "refused":
      return { outcome: "refused_private_target", error: NO_PUBLIC_ADDRESS };
    case "network":
      return {
        outcome: "network_error",
        error: noPublicAddress(failure)
          ? NO_PUBLIC_ADDRESS
          : failure.code
            ? `connection failed: ${failure.code}`
            : "request failed",
      };
  }
}
