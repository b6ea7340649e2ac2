/**
 * The delivery worker: claims due deliveries (deliveries.ts), POSTs each signed event to its
 * endpoint with a bounded timeout, and records the attempt with what comes next (schedule.ts).
 * Any number of instances may run it against one database; claims never overlap, and a killed
 * instance's claims come back when their lease ends. Delivery is at least once: a receiver
 * de-duplicates on `webhook-id`, the event's id, which every retry and redelivery repeats.
 *
 * The worker is a pool of `concurrency` slots, each refilled the moment its delivery ends: a
 * receiver that never answers holds its own slot until the timeout and no other. What a slot may
 * take is bounded per endpoint and per project (the in-flight caps), so one project's backlog or
 * outage takes at most `perProject` slots and the others keep flowing.
 *
 * An endpoint that takes several events per request (`max_events_per_request`, migration 053)
 * gets, in each request, up to that many of its claimed deliveries that wait together: one
 * exchange, one slot, counted once against the caps, and one attempt of each delivery in it, each
 * recorded and rescheduled on its own. The request's `webhook-id` names the batch; each event in
 * it keeps its own id, which is what such a receiver de-duplicates on.
 */
import { hash } from "node:crypto";

import { batchPerKey } from "../batching.ts";
import { type PollLoop, pollLoop, type WatcherLog } from "../chains/poll-loop.ts";
import type { Db } from "../db/db.ts";
import type { Metrics, WebhookAttemptOutcome } from "../metrics/metrics.ts";
import type { Keyring } from "../secrets/envelope.ts";
import { deadline } from "./deadline.ts";
import {
  type AttemptResult,
  type ClaimedDelivery,
  claimDue,
  type InFlight,
  type InFlightCaps,
  recordAttempts,
  releaseClaims,
} from "./deliveries.ts";
import {
  NO_PUBLIC_ADDRESS,
  noPublicAddress,
  sendFailure,
  type WebhookSend,
  webhookSender,
} from "./egress.ts";
import { RELAY_LIMIT, relaySponsoredEvents } from "./relay.ts";
import { afterFailure, delivered, type RetryPolicy } from "./schedule.ts";
import { signedHeaders } from "./signing.ts";

export interface WorkerOptions {
  retry: RetryPolicy;
  /** Bound on one attempt: connecting, sending, and the receiver's answer. */
  timeoutMs: number;
  /** How often the outbox is polled when there is nothing to do. */
  pollIntervalMs: number;
  /** Deliveries in flight at once per instance (the pool's slots). */
  concurrency?: number;
  /** Deliveries in flight at once per endpoint and per project, on this instance. */
  caps?: Partial<InFlightCaps>;
  random?: () => number;
  now?: () => number;
  /** What requests are sent with (webhooks/egress.ts: the guard against private targets). */
  send?: WebhookSend;
  /** Where attempts and deliveries given up on are counted; nothing is counted without it. */
  metrics?: Pick<Metrics, "webhookAttempt" | "webhookGaveUp">;
  /** Opens the endpoints' signing secrets (stored sealed, webhooks/store.ts). */
  keyring: Keyring;
}

export interface WebhookWorker {
  start(log?: WatcherLog): void;
  stop(): Promise<void>;
  /**
   * Attempts what is due until nothing more can be claimed and nothing is in flight (tests drive
   * the worker with it). Returns how many were attempted.
   */
  drain(): Promise<number>;
  /**
   * Sponsorships were just reserved: relay their sponsorship.sponsored events soon (relay.ts), at
   * most one pass per RELAY_AFTER_MS, and claim what the pass wrote. Does nothing until started.
   */
  kick(): void;
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

/**
 * Several events in one request: `{"events":[…]}`, each exactly as eventBody has it, oldest claim
 * first. The same deliveries in the same order make the same bytes.
 */
export function batchBody(group: readonly Parameters<typeof eventBody>[0][]): string {
  return `{"events":[${group.map(eventBody).join(",")}]}`;
}

/**
 * A batch's `webhook-id`: `batch_` and the first 128 bits of the SHA-256 of its event ids, so a
 * retry of the same events in the same order repeats it. A failed batch's events may be retried in
 * other company (each on its own schedule), under another id: receivers de-duplicate on each
 * event's `id`.
 */
export function batchId(group: readonly Pick<ClaimedDelivery, "eventId">[]): string {
  return `batch_${hash("sha256", group.map((d) => d.eventId).join(",")).slice(0, 32)}`;
}

/** Slots per instance, and the caps within them, unless the configuration says otherwise. */
export const DEFAULT_CONCURRENCY = 64;
export const DEFAULT_CAPS: InFlightCaps = { perEndpoint: 8, perProject: 16 };

export function webhookWorker(db: Db, options: WorkerOptions): WebhookWorker {
  const caps: InFlightCaps = { ...DEFAULT_CAPS, ...options.caps };
  // Past the attempt's own timeout, with room to record its result: only a dead instance's
  // claims outlive it.
  const leaseMs = 2 * options.timeoutMs + 1000;
  let log: WatcherLog | undefined;
  // Aborted on stop: requests in flight end at once and their deliveries are handed back.
  let stopping = new AbortController();
  // Hand-backs that come together (a stop hands back all that waits, and every request it
  // aborts) go in one statement: one per delivery was up to eight per slot at each stop.
  const releaseBatch = batchPerKey(async (_: "release", items: ClaimedDelivery[]) => {
    await releaseClaims(db, items);
    return items.map(() => undefined);
  });
  const release = (d: ClaimedDelivery) => releaseBatch("release", d);
  const attempt = attempter(db, options, release);
  // Claims count what is sending and what waits for its slot, one waiting per slot at most.
  const claimCaps: InFlightCaps = {
    perEndpoint: CLAIMED_PER_SLOT * caps.perEndpoint,
    perProject: CLAIMED_PER_SLOT * caps.perProject,
  };
  const pool = deliveryPool({
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    caps,
    // A waiting delivery that starts within this still ends its attempt, timeout included, inside
    // its lease with a second to spare for the record.
    maxWaitMs: leaseMs - options.timeoutMs - 1000,
    claim: (limit, claimed) => claimDue(db, limit, leaseMs, claimCaps, claimed, options.keyring),
    run: (group, exchanged) => attempt(group, stopping.signal, log, exchanged),
    release,
    stopped: () => stopping.signal.aborted,
    warn: (obj, msg) => log?.warn(obj, msg),
  });

  // The relay of sponsorship.sponsored events (relay.ts): a pass at each poll tick, and one soon
  // after this instance's reservations (kick), at most one per RELAY_AFTER_MS so that a pass
  // writes the events of many authorizations in one statement. A pass that wrote events is
  // followed by a claim within REFILL_AFTER_MS, rather than at the next tick.
  let relaying: Promise<void> | null = null;
  let relayAgain = false;
  let relayTimer: NodeJS.Timeout | null = null;
  let lastRelayAt = Number.NEGATIVE_INFINITY;
  /** Relays until a pass comes back short; answers how many sponsorships it passed in all. */
  const relayPass = async (): Promise<number> => {
    lastRelayAt = performance.now();
    let total = 0;
    let passed = RELAY_LIMIT;
    while (passed >= RELAY_LIMIT && !stopping.signal.aborted) {
      passed = await relaySponsoredEvents(db);
      total += passed;
    }
    return total;
  };
  const relayFailed = (err: unknown): void => {
    log?.warn({ err: (err as Error).message }, "sponsored events relay failed");
  };
  const relayNow = (): void => {
    relayTimer = null;
    if (loop === null) return;
    relaying = relayPass()
      // Claimed at the pace of the refills (REFILL_AFTER_MS), not one claim per pass; a pass that
      // found nothing (no project subscribes) claims nothing.
      .then((passed) => {
        if (passed > 0) pool.nudge();
      })
      .catch(relayFailed)
      .finally(() => {
        relaying = null;
        if (relayAgain) {
          relayAgain = false;
          kick();
        }
      });
  };
  const kick = (): void => {
    if (loop === null || relayTimer !== null) return;
    if (relaying !== null) {
      relayAgain = true;
      return;
    }
    relayTimer = setTimeout(relayNow, Math.max(0, lastRelayAt + RELAY_AFTER_MS - performance.now()));
  };

  let loop: PollLoop | null = null;
  return {
    start(l) {
      log = l;
      stopping = new AbortController();
      // A tick relays what other instances reserved, then fills free slots; deliveries run on,
      // and each refills its slot when it ends.
      const tick = async () => {
        // A relay that fails (logged) leaves the deliveries already written to go out all the same.
        await relayPass().catch(relayFailed);
        await pool.fill();
      };
      loop = pollLoop(tick, {
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
      if (relayTimer) clearTimeout(relayTimer);
      relayTimer = null;
      relayAgain = false;
      await relaying;
      await pool.settle();
    },
    async drain() {
      await relayPass();
      return pool.drain();
    },
    kick,
  };
}

/** One attempt of a claimed delivery: the signed POST under its deadline, then its record. */
function attempter(db: Db, options: WorkerOptions, release: (d: ClaimedDelivery) => Promise<void>) {
  // Attempts that end while one record is on its way are recorded together in the next statement.
  const recordBatch = batchPerKey((_: "attempts", items: Parameters<typeof recordAttempts>[1]) =>
    recordAttempts(db, items),
  );
  const record = (delivery: ClaimedDelivery, result: AttemptResult) =>
    recordBatch("attempts", { delivery, result });
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  const send: WebhookSend = options.send ?? webhookSender("allow");
  /** What follows an attempt: done, a retry on the schedule, or failed for good. */
  const nextAfter = (attempt: number, failed: boolean): AttemptResult["next"] => {
    if (!failed) return { kind: "succeeded" };
    const after = afterFailure(options.retry, attempt, random());
    return after.kind === "retry" ? { kind: "retry", delayMs: after.delayMs } : { kind: "failed" };
  };
  /** Records an attempt; counted as given up only when the delivery really ended failed (not redelivered meanwhile). */
  const recordCounted = async (d: ClaimedDelivery, result: AttemptResult): Promise<void> => {
    const recorded = await record(d, result);
    if (result.next.kind === "failed" && recorded) options.metrics?.webhookGaveUp();
  };
  /**
   * A delivery whose secret cannot be opened is not sent, and the attempt is logged as failed
   * (on the usual schedule: a key put back into the configuration lets a retry through). The log
   * names the delivery, the endpoint and the reason, never a secret.
   */
  const notSent = async (d: ClaimedDelivery, problem: string, log?: WatcherLog): Promise<void> => {
    const error = "not sent: the endpoint's signing secret cannot be decrypted";
    const next = nextAfter(d.attempt, true);
    await recordCounted(d, { startedAt: new Date(now()), latencyMs: 0, statusCode: null, error, next });
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
  return async (
    group: ClaimedDelivery[],
    stopping: AbortSignal,
    log: WatcherLog | undefined,
    exchanged: () => void,
  ): Promise<void> => {
    // One endpoint's deliveries; the latest claim carries its newest secrets.
    const signer = group[group.length - 1]!;
    if (signer.secretProblem !== null) {
      const problem = signer.secretProblem;
      await Promise.all(group.map((d) => notSent(d, problem, log)));
      return;
    }
    // Whether the endpoint took batches when the group was formed (its first delivery's claim):
    // several deliveries always go as a batch, so that none is recorded without being sent.
    const batched = group.length > 1 || group[0]!.perRequest > 1;
    const body = batched ? batchBody(group) : eventBody(signer);
    const id = batched ? batchId(group) : signer.eventId;
    const startedAt = new Date(now());
    const headers = signedHeaders(signer.secrets, id, Math.floor(startedAt.getTime() / 1000), body);
    let statusCode: number | null = null;
    let error: string | null = null;
    let outcome: WebhookAttemptOutcome;
    // The metric's clock is monotonic; the log's latency follows `now` like its timestamps.
    const exchangeStarted = performance.now();
    const limit = deadline(options.timeoutMs, stopping);
    try {
      const res = await send(signer.url, {
        headers: { ...headers, "user-agent": "gas-sponsorship-webhooks/1" },
        body,
        signal: limit.signal,
      });
      // The answer's body is not needed: the sender reads it away, which frees the connection.
      statusCode = res.status;
      outcome = delivered(res.status) ? "delivered" : "http_error";
      if (!delivered(res.status)) error = `HTTP ${res.status}`;
    } catch (err) {
      if (stopping.aborted) {
        await Promise.all(group.map(release));
        return;
      }
      ({ outcome, error } = describeFailure(err, options.timeoutMs));
    } finally {
      limit.clear();
    }
    // The receiver is done with this request: its slot may take the next before the record is in.
    exchanged();
    const seconds = (performance.now() - exchangeStarted) / 1000;
    const latencyMs = Math.max(0, now() - startedAt.getTime());
    await Promise.all(
      group.map(async (d) => {
        options.metrics?.webhookAttempt(outcome, seconds);
        const next = nextAfter(d.attempt, error !== null);
        await recordCounted(d, { startedAt, latencyMs, statusCode, error, next });
        if (next.kind === "failed") {
          log?.warn(
            { delivery: d.id, event: d.eventId, attempts: d.attempt, error },
            "webhook delivery failed for good",
          );
        }
      }),
    );
  };
}

interface DeliveryPool {
  /** Starts what waits and fits, and claims until the claimed are full or a claim comes back short. */
  fill(): Promise<void>;
  /** Fills, and fills again as slots free, until nothing is claimed; resolves to how many were sent. */
  drain(): Promise<number>;
  /** New deliveries were written: claim them within REFILL_AFTER_MS, with whatever else freed meanwhile. */
  nudge(): void;
  /** Once stopped: hands back what waits, then waits for the claim and the deliveries in flight. */
  settle(): Promise<void>;
}

/**
 * Deliveries claimed per slot: the one sending and up to seven waiting for the slot to free. A
 * slot's next delivery starts the moment the receiver answers, without a claim's round trip in
 * between; the claim that refills the wait runs meanwhile. A claim is the costliest statement of
 * a delivery (embedded, 3 ms of PGlite's CPU: half of it planning, which PGlite cannot keep
 * between calls), so claims come at most once per REFILL_AFTER_MS, and a slot's share of what
 * arrives in that time must fit in one. Under `npm run bench` (events subscribed, embedded, one
 * endpoint at 16 in flight) two per slot and a claim as soon as nothing waited made about 100
 * claims a second, and 56-61 % of the events were delivered while the scenario ran; eight per slot
 * and one claim per 20 ms at most made about 42 a second, and every event was delivered during the
 * scenario (bench/results-2026-11-30-webhook-claim-window.txt).
 */
const CLAIMED_PER_SLOT = 8;

/**
 * The shortest time between two claims that refill freed slots: what arrives meanwhile goes out
 * in one claim instead of one claim per exchange. It is also the most a delivery due while the
 * slots wait can be held back by it.
 */
export const REFILL_AFTER_MS = 20;

/**
 * The shortest time between two relay passes that follow reservations (kick): the events of what
 * is reserved meanwhile are written by one statement. It is also about the most it adds to an
 * event's way out.
 */
export const RELAY_AFTER_MS = 20;

/**
 * The worker's slots. A delivery holds a slot during its exchange with the receiver; the caps
 * bound the exchanges per endpoint and per project. Claims run one at a time per instance and take
 * up to CLAIMED_PER_SLOT deliveries per slot (the claim's caps scaled alike, so each endpoint and
 * project has at most one delivery waiting per exchange it may have open), so that a freed slot
 * starts its next delivery at once. A delivery waits at most `maxWaitMs` (the attempt's timeout
 * with the default lease): one that waited longer, behind a receiver that hangs, is handed back
 * due at once rather than sent so late that its lease could end mid-attempt.
 *
 * Each instance still keeps slots for everyone else: a project's waiting deliveries take no slot,
 * and its exchanges no more than its cap.
 */
function deliveryPool(p: {
  concurrency: number;
  caps: InFlightCaps;
  maxWaitMs: number;
  claim(limit: number, claimed: InFlight): Promise<ClaimedDelivery[]>;
  /**
   * Attempts one endpoint's deliveries in one request (one delivery unless the endpoint takes
   * batches); calls `exchanged` once the receiver is done with it (or never reached).
   */
  run(group: ClaimedDelivery[], exchanged: () => void): Promise<void>;
  /** Hands a claimed delivery back unattempted, due at once. */
  release(d: ClaimedDelivery): Promise<void>;
  stopped(): boolean;
  warn(obj: object, msg: string): void;
}): DeliveryPool {
  // Until their records are in (drain and settle wait for them).
  const running = new Set<Promise<void>>();
  // Exchanges open now: what the caps bound.
  const sending = { total: 0, byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
  // Claimed and not yet exchanged (sending or waiting): what the claims count.
  const claimed = { total: 0, byEndpoint: new Map<number, number>(), byProject: new Map<string, number>() };
  // Claimed, waiting for a slot, in claim order (oldest due first).
  let waiting: { d: ClaimedDelivery; claimedAt: number }[] = [];
  let launched = 0;
  // The claim under way, if any; `again` asks it for one more round (something freed meanwhile).
  let claiming: Promise<void> | null = null;
  let again = false;
  // When the last claim was asked for (performance.now()): refills keep REFILL_AFTER_MS from it.
  let lastClaimAt = Number.NEGATIVE_INFINITY;

  const count = (c: typeof claimed, d: ClaimedDelivery, by: number) => {
    c.total += by;
    bump(c.byEndpoint, d.endpointId, by);
    bump(c.byProject, d.projectId, by);
  };
  const track = (work: Promise<void>) => {
    running.add(work);
    void work.finally(() => running.delete(work));
  };

  /** One exchange: a slot and one count against the caps, however many deliveries it carries. */
  const launch = (group: ClaimedDelivery[]): void => {
    const d = group[0]!;
    launched += group.length;
    count(sending, d, 1);
    let open = true;
    const exchanged = () => {
      if (!open) return;
      open = false;
      count(sending, d, -1);
      for (const g of group) count(claimed, g, -1);
      if (!p.stopped()) {
        startWaiting();
        refill();
      }
    };
    track(
      p
        .run(group, exchanged)
        // Not recorded (the database is away): the lease brings the deliveries back.
        .catch((err) =>
          p.warn(
            { deliveries: group.map((g) => g.id), err: (err as Error).message },
            "webhook attempt not recorded",
          ),
        )
        .finally(exchanged),
    );
  };

  const handBack = (d: ClaimedDelivery): void => {
    count(claimed, d, -1);
    // Not handed back (the database is away): the lease brings it back.
    track(
      p
        .release(d)
        .catch((err) =>
          p.warn({ delivery: d.id, err: (err as Error).message }, "webhook claim not released"),
        ),
    );
  };

  /**
   * Starts the waiting deliveries that fit under the caps now, oldest first. A delivery to an
   * endpoint that takes batches takes with it the endpoint's later waiting deliveries, up to the
   * endpoint's number per request.
   */
  const startWaiting = (): void => {
    // Once stopped nothing starts: settle hands back what waits, a claim that returns late included.
    if (waiting.length === 0 || p.stopped()) return;
    const now = performance.now();
    const stale = (w: (typeof waiting)[number]) => now - w.claimedAt > p.maxWaitMs;
    const still: typeof waiting = [];
    const taken = new Set<(typeof waiting)[number]>();
    for (let i = 0; i < waiting.length; i++) {
      const w = waiting[i]!;
      if (taken.has(w)) continue;
      const d = w.d;
      if (stale(w)) handBack(d);
      else if (
        sending.total < p.concurrency &&
        (sending.byEndpoint.get(d.endpointId) ?? 0) < p.caps.perEndpoint &&
        (sending.byProject.get(d.projectId) ?? 0) < p.caps.perProject
      ) {
        const group = [d];
        for (let j = i + 1; j < waiting.length && group.length < d.perRequest; j++) {
          const other = waiting[j]!;
          if (other.d.endpointId !== d.endpointId || taken.has(other) || stale(other)) continue;
          taken.add(other);
          group.push(other.d);
        }
        launch(group);
      } else still.push(w);
    }
    waiting = still;
  };

  const rounds = async (): Promise<void> => {
    try {
      do {
        again = false;
        while (!p.stopped() && claimed.total < CLAIMED_PER_SLOT * p.concurrency) {
          const free = CLAIMED_PER_SLOT * p.concurrency - claimed.total;
          lastClaimAt = performance.now();
          const got = await p.claim(free, claimed);
          const claimedAt = performance.now();
          for (const d of got) {
            count(claimed, d, 1);
            waiting.push({ d, claimedAt });
          }
          startWaiting();
          // Fewer than asked: the claim took everything it could at that moment. Asking again at
          // once would find only what committed since, at the price of another look over the due
          // rows, which grows with the backlog when the rows ahead belong to endpoints at their
          // cap (it did: one look per delivery). A freed slot, a new round (`again`) or the
          // poll's next tick picks up the rest.
          if (got.length < free) break;
        }
      } while (again && !p.stopped());
    } finally {
      // In the same turn as the last look at `again`: nothing freed goes unnoticed in between.
      claiming = null;
    }
  };

  const fillNow = (): void => {
    fill().catch((err) => p.warn({ err: (err as Error).message }, "webhook claim failed"));
  };
  // While deliveries wait claimed, the freed slots were refilled from them: the claim that tops
  // the wait up can take what several exchanges freed at once, a moment later, instead of one
  // claim per exchange. Nothing waiting: claim at once, a slot is idle, unless a claim went out
  // less than REFILL_AFTER_MS ago: then at the end of that window, with what arrived in it.
  let refillTimer: NodeJS.Timeout | null = null;
  const refill = (): void => {
    const sinceClaim = performance.now() - lastClaimAt;
    if (waiting.length === 0 && sinceClaim >= REFILL_AFTER_MS) {
      fillNow();
      return;
    }
    if (refillTimer) return;
    refillTimer = setTimeout(
      () => {
        refillTimer = null;
        if (!p.stopped()) fillNow();
      },
      waiting.length === 0 ? REFILL_AFTER_MS - sinceClaim : REFILL_AFTER_MS,
    );
  };

  const fill = (): Promise<void> => {
    startWaiting();
    if (claiming) {
      again = true;
      return claiming;
    }
    claiming = rounds();
    return claiming;
  };

  return {
    fill,
    nudge: refill,
    async drain() {
      const before = launched;
      await fill();
      while ((running.size > 0 || waiting.length > 0) && !p.stopped()) {
        if (running.size > 0) await Promise.race(running);
        await fill();
      }
      return launched - before;
    },
    async settle() {
      if (refillTimer) clearTimeout(refillTimer);
      refillTimer = null;
      await claiming?.catch(() => {});
      const left = waiting;
      waiting = [];
      for (const w of left) handBack(w.d);
      // Aborted requests hand their deliveries back (release) before this resolves.
      await Promise.allSettled([...running]);
    },
  };
}

function bump<K>(counts: Map<K, number>, key: K, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
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
