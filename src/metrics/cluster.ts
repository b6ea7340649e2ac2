/**
 * /metrics in cluster mode. Behind the shared port a scrape reaches one worker at a time, and a
 * worker's own counters would then jump up and down between scrapes (Prometheus reads every drop
 * of a counter as a restart). So a worker answering /metrics asks the primary, which collects
 * every live worker's metrics over the cluster's IPC channel and adds them up with prom-client's
 * `AggregatorRegistry.aggregate` (counters and histograms summed, gauges by their `aggregator`,
 * see metrics.ts); the scrape sees the whole instance, whichever worker it reached.
 *
 * A worker that does not answer within COLLECT_TIMEOUT_MS is left out of that scrape (its series
 * dip for one scrape rather than the scrape failing); a worker whose primary does not answer
 * serves its own metrics only, and logs it.
 */
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry } from "prom-client";

const COLLECT_TIMEOUT_MS = 2_000;

type Message =
  | { gss: "metrics-request"; id: number }
  | { gss: "metrics-response"; id: number; text: string | null; contentType: string }
  | { gss: "metrics-collect"; id: number }
  | { gss: "metrics-snapshot"; id: number; metrics: unknown[] };

function isMessage(m: unknown): m is Message {
  return typeof m === "object" && m !== null && typeof (m as { gss?: unknown }).gss === "string";
}

/** In the primary: answers workers' scrapes with the metrics of every worker, added up. */
export function servePrimaryMetrics(): void {
  let nextId = 1;
  const pending = new Map<number, { results: unknown[][]; waiting: Set<number>; done: () => void }>();

  cluster.on("message", (worker: Worker, message: unknown) => {
    if (!isMessage(message)) return;
    if (message.gss === "metrics-snapshot") {
      const round = pending.get(message.id);
      if (!round?.waiting.delete(worker.id)) return;
      round.results.push(message.metrics);
      if (round.waiting.size === 0) round.done();
      return;
    }
    if (message.gss !== "metrics-request") return;
    const id = nextId++;
    const workers = Object.values(cluster.workers ?? {}).filter(
      (w): w is Worker => w?.isConnected() === true,
    );
    const results: unknown[][] = [];
    const reply = () => {
      clearTimeout(timer);
      pending.delete(id);
      const registry = AggregatorRegistry.aggregate(results as never[]);
      void registry.metrics().then(
        (text) =>
          send(worker, { gss: "metrics-response", id: message.id, text, contentType: registry.contentType }),
        () => send(worker, { gss: "metrics-response", id: message.id, text: null, contentType: "" }),
      );
    };
    const timer = setTimeout(reply, COLLECT_TIMEOUT_MS);
    pending.set(id, { results, waiting: new Set(workers.map((w) => w.id)), done: reply });
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
