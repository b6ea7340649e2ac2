/**
 * /metrics in cluster mode. Behind the shared port a scrape reaches one worker at a time, and a
 * worker's own counters would then jump up and down between scrapes (Prometheus reads every drop
 * of a counter as a restart). So a worker answering /metrics asks the primary, which collects
 * every live worker's metrics over the cluster's IPC channel and adds them up with prom-client's
 * `AggregatorRegistry.aggregate` (counters and histograms summed, gauges by their `aggregator`,
 * see metrics.ts); the scrape sees the whole instance, whichever worker it reached.
 *
 * Counters and histograms must never go backwards, yet a worker that dies takes its counts with
 * it, and its replacement starts from zero. So the primary remembers the last snapshot each worker
 * sent, and when a worker exits it adds that snapshot's counters and histograms (gauges describe a
 * live process and are dropped) into a retained base, which every later sum includes. What a worker
 * counted after its last snapshot is lost, but the sum never drops below what was shown. A live
 * worker that does not answer within COLLECT_TIMEOUT_MS is counted by its last snapshot, in the
 * same way; its gauges are missing from that scrape. A worker whose primary does not answer serves
 * its own metrics only, and says so in the exposition.
 */
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";

/** One family of a registry's JSON form, as workers send it. */
type MetricJson = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>[number];

const COLLECT_TIMEOUT_MS = 2_000;

type Message =
  | { gss: "metrics-request"; id: number }
  | { gss: "metrics-response"; id: number; text: string | null; contentType: string }
  | { gss: "metrics-collect"; id: number }
  | { gss: "metrics-snapshot"; id: number; metrics: unknown[] };

function isMessage(m: unknown): m is Message {
  return typeof m === "object" && m !== null && typeof (m as { gss?: unknown }).gss === "string";
}

/** Families whose samples only grow while a process lives, and so may be carried past its end. */
const MONOTONIC_TYPES = new Set(["counter", "histogram"]);

function monotonicPart(snapshot: readonly MetricJson[]): MetricJson[] {
  return snapshot.filter((m) => MONOTONIC_TYPES.has(String(m.type)));
}

/** prom-client's sum of several snapshots, back as a snapshot (synchronous: nothing to collect). */
function added(snapshots: MetricJson[][]): MetricJson[] {
  return AggregatorRegistry.aggregate(snapshots)
    .getMetricsAsArray()
    .map((m) => {
      const { help, name, type, values, aggregator } = m as unknown as MetricJson;
      return { help, name, type, values, aggregator } as MetricJson;
    });
}

/**
 * The primary's memory of the workers' counts: the last snapshot of each live worker, and the
 * retained base of every worker that exited. Keyed by node:cluster's worker id, which a
 * replacement never reuses.
 */
export interface ClusterTotals {
  /** A worker's answer to a collection round. */
  answered(workerId: number, snapshot: MetricJson[]): void;
  /** A worker exited: its last counts join the retained base. */
  exited(workerId: number): void;
  /**
   * The cluster's registry for one scrape: the snapshots received, the last counts of the live
   * workers that did not answer in time, and the retained base.
   */
  sum(received: MetricJson[][], silentWorkerIds: readonly number[]): Registry;
}

export function clusterTotals(): ClusterTotals {
  const last = new Map<number, MetricJson[]>();
  let retained: MetricJson[] = [];
  return {
    answered(workerId, snapshot) {
      last.set(workerId, snapshot);
    },
    exited(workerId) {
      const snapshot = last.get(workerId);
      last.delete(workerId);
      // Folded at once into one base: a crash loop must not grow the primary's memory.
      if (snapshot) retained = added([retained, monotonicPart(snapshot)]);
    },
    sum(received, silentWorkerIds) {
      const silent = silentWorkerIds.map((id) => monotonicPart(last.get(id) ?? []));
      return AggregatorRegistry.aggregate([...received, ...silent, retained]);
    },
  };
}

/** In the primary: answers workers' scrapes with the metrics of every worker, added up. */
export function servePrimaryMetrics(totals: ClusterTotals = clusterTotals()): void {
  let nextId = 1;
  const pending = new Map<number, { results: MetricJson[][]; waiting: Set<number>; done: () => void }>();

  cluster.on("exit", (worker: Worker) => {
    // A round still waiting for it would otherwise count it twice: as silent, and in the base.
    for (const round of pending.values()) round.waiting.delete(worker.id);
    totals.exited(worker.id);
  });

  cluster.on("message", (worker: Worker, message: unknown) => {
    if (!isMessage(message)) return;
    if (message.gss === "metrics-snapshot") {
      const round = pending.get(message.id);
      if (!round?.waiting.delete(worker.id)) return;
      const snapshot = message.metrics as MetricJson[];
      totals.answered(worker.id, snapshot);
      round.results.push(snapshot);
      if (round.waiting.size === 0) round.done();
      return;
    }
    if (message.gss !== "metrics-request") return;
    const id = nextId++;
    const workers = Object.values(cluster.workers ?? {}).filter(
      (w): w is Worker => w?.isConnected() === true,
    );
    const results: MetricJson[][] = [];
    const waiting = new Set(workers.map((w) => w.id));
    const reply = () => {
      clearTimeout(timer);
      pending.delete(id);
      const registry = totals.sum(results, [...waiting]);
      void registry.metrics().then(
        (text) =>
          send(worker, { gss: "metrics-response", id: message.id, text, contentType: registry.contentType }),
        () => send(worker, { gss: "metrics-response", id: message.id, text: null, contentType: "" }),
      );
    };
    const timer = setTimeout(reply, COLLECT_TIMEOUT_MS);
    pending.set(id, { results, waiting, done: reply });
    for (const w of workers) send(w, { gss: "metrics-collect", id });
    if (workers.length === 0) reply();
  });
}

function send(worker: Worker, message: Message) {
  if (worker.isConnected()) worker.send(message, (err: Error | null) => void err);
}

export interface ClusterMetricsClient {
  /** The whole cluster's exposition, or null when the primary did not answer in time. */
  exposition(): Promise<{ text: string; contentType: string } | null>;
}

/**
 * In a worker: answers the primary's collection rounds with this worker's snapshot, and fetches
 * the cluster's exposition for a scrape.
 */
export function clusterMetricsClient(snapshot: () => Promise<unknown[]>): ClusterMetricsClient {
  let nextId = 1;
  const waiting = new Map<number, (m: { text: string; contentType: string } | null) => void>();
  process.on("message", (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.gss === "metrics-collect") {
      void snapshot().then(
        (metrics) => process.send?.({ gss: "metrics-snapshot", id: message.id, metrics } satisfies Message),
        () => {},
      );
    } else if (message.gss === "metrics-response") {
      const { text, contentType } = message;
      waiting.get(message.id)?.(text === null ? null : { text, contentType });
    }
  });
  return {
    exposition() {
      const id = nextId++;
      return new Promise((resolve) => {
        const timer = setTimeout(() => finish(null), COLLECT_TIMEOUT_MS + 1_000);
        const finish = (m: { text: string; contentType: string } | null) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(m ? { text: m.text, contentType: m.contentType } : null);
        };
        waiting.set(id, finish);
        process.send?.({ gss: "metrics-request", id } satisfies Message);
      });
    },
  };
}
