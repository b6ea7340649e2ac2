/**
 * Readiness means "can serve authorize". Only a dependency authorize cannot do without is `down`
 * (the database: every authorization is a reservation in it), and makes /health/ready answer 503
 * so that a load balancer takes the instance out. A chain's RPC, Redis, a stale fee oracle, a
 * lagging watcher or a low paymaster deposit are `degraded`: the instance still serves (Redis's
 * limits fall back to memory; a chain without fresh fees refuses its own authorizations with
 * 503 fee_oracle_stale), and dropping every instance during an RPC blip would help no one.
 *
 * Each check's changes of state are logged once, when they happen (warn when it gets worse,
 * error for a critical state, info when it recovers), whether the evaluation came from a request
 * or from the background timer (READINESS_INTERVAL_MS), which also keeps the readiness metrics
 * fresh when nobody asks.
 */
import type { FastifyBaseLogger } from "fastify";
import type { Metrics } from "../metrics/metrics.ts";

export type CheckStatus = "ok" | "degraded" | "down";

export interface CheckResult {
  status: CheckStatus;
  detail?: string;
  /** A degraded state that needs someone now (a paymaster that cannot pay what was authorized): logged at error level. */
  critical?: boolean;
}

export interface ReadinessProbe {
  name: string;
  /** Resolves with the dependency's state; must not throw. */
  check(): Promise<CheckResult>;
}

export interface ReadinessReport {
  status: "ok" | "degraded" | "unavailable";
  checks: Record<string, { status: CheckStatus; detail?: string }>;
}

export interface ReadinessMonitor {
  /** Runs every probe now, logs the transitions, updates the metrics. */
  evaluate(): Promise<ReadinessReport>;
  /** Evaluates every `intervalMs` in the background (0: never). */
  start(intervalMs: number): void;
  stop(): Promise<void>;
}

/** Pure: the overall state from the checks. */
export function overallStatus(results: CheckResult[]): ReadinessReport["status"] {
  if (results.some((r) => r.status === "down")) return "unavailable";
  return results.some((r) => r.status === "degraded") ? "degraded" : "ok";
}

type State = `${CheckStatus}${"" | "!"}`;
const stateOf = (r: CheckResult): State => (r.critical && r.status !== "ok" ? `${r.status}!` : r.status);

/**
 * @param probes read on every evaluation (tests add probes to the live array).
 */
export function readinessMonitor(
  probes: readonly ReadinessProbe[],
  deps: { log: FastifyBaseLogger; metrics: Metrics },
): ReadinessMonitor {
  const { log, metrics } = deps;
  // The last state seen of each check, with the evaluation that saw it: an older evaluation that
  // finishes late must not overwrite a newer one (and log a transition back and forth).
  const last = new Map<string, { state: State; seq: number }>();
  let seq = 0;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;

  const record = (name: string, result: CheckResult, at: number) => {
    metrics.readinessCheck(name, result.status);
    const previous = last.get(name);
    if (previous && previous.seq > at) return;
    const state = stateOf(result);
    last.set(name, { state, seq: at });
    if (previous?.state === state || (!previous && state === "ok")) return;
    const fields = { check: name, from: previous?.state ?? "unknown", to: state, detail: result.detail };
    if (state === "ok") log.info(fields, "readiness changed");
    else if (result.critical) log.error(fields, "readiness changed");
    else log.warn(fields, "readiness changed");
  };

  const evaluate = async (): Promise<ReadinessReport> => {
    const at = ++seq;
    const results = await Promise.all(
      probes.map(async (probe) => {
        const result = await Promise.resolve()
          .then(() => probe.check())
          .catch(
            (err: Error): CheckResult => ({ status: "degraded", detail: `check failed: ${err.message}` }),
          );
        record(probe.name, result, at);
        return [probe.name, result] as const;
      }),
    );
    const checks = Object.fromEntries(
      results.map(([name, r]) => [
        name,
        r.detail === undefined ? { status: r.status } : { status: r.status, detail: r.detail },
      ]),
    );
    return { status: overallStatus(results.map(([, r]) => r)), checks };
  };

  return {
    evaluate,
    start(intervalMs) {
      if (intervalMs <= 0 || timer) return;
      const tick = () => {
        running = evaluate()
          .catch(() => {})
          .finally(() => {
            running = null;
            if (timer) timer = setTimeout(tick, intervalMs).unref();
          });
      };
      timer = setTimeout(tick, intervalMs).unref();
    },
    async stop() {
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
