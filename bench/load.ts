import autocannon from "autocannon";
import { machineCpu } from "./processes.ts";

/**
 * Drives one scenario with autocannon in this process and summarises it. Latencies are taken
 * from every response (refusals included), in fractional milliseconds, instead of autocannon's
 * whole-millisecond histogram, so a p50 under 1 ms still reads as a number.
 */

export interface LoadSpec {
  url: string;
  path: string;
  apiKey: string | null;
  bodies: string[];
  /** GET these paths in turn instead of POSTing `bodies` to `path`. */
  getPaths?: string[];
  connections: number;
  durationSec: number;
  /**
   * Requests per second offered in all, spread over the connections (autocannon's overallRate);
   * absent: each connection sends its next request as soon as the last one is answered.
   */
  rate?: number;
}

export interface LoadResult {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  responses: number;
  ok: number;
  /** Responses other than 200, plus connection errors and timeouts, over all attempts. */
  non200Share: number;
  statusCounts: Record<string, number>;
  /** Share of the machine's CPU time (all cores) that was busy during the run. */
  machineBusy: number;
  /** Busy CPU time of the whole machine during the run, in ms (every process, every core). */
  machineBusyMs: number;
  /** CPU time of this process (the load generator) during the run, in ms. */
  loadGenCpuMs: number;
  elapsedSec: number;
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (spec.apiKey) headers.authorization = `Bearer ${spec.apiKey}`;
  // Pre-built requests: autocannon renders each one once and then cycles through the buffers.
  const requests = spec.getPaths
    ? spec.getPaths.map((path) => ({ method: "GET" as const, path, headers }))
    : spec.bodies.map((body) => ({ method: "POST" as const, path: spec.path, headers, body }));

  const latencies: number[] = [];
  const statusCounts: Record<string, number> = {};
  const cpuBefore = machineCpu();
  const ownBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationSec,
        requests,
        timeout: 10,
        ...(spec.rate ? { overallRate: spec.rate } : {}),
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    instance.on("response", (_client, statusCode, _bytes, responseTimeMs) => {
      latencies.push(responseTimeMs);
      statusCounts[statusCode] = (statusCounts[statusCode] ?? 0) + 1;
    });
  });
  const elapsedSec = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuAfter = machineCpu();
  const own = process.cpuUsage(ownBefore);

  const ok = statusCounts["200"] ?? 0;
  const failures = result.errors + result.timeouts;
  const attempts = latencies.length + failures;
  latencies.sort((a, b) => a - b);
  return {
    requestsPerSec: latencies.length / spec.durationSec,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    responses: latencies.length,
    ok,
    non200Share: attempts === 0 ? 1 : (attempts - ok) / attempts,
    statusCounts: failures > 0 ? { ...statusCounts, errors: failures } : statusCounts,
    machineBusy: (cpuAfter.busyMs - cpuBefore.busyMs) / (cpuAfter.totalMs - cpuBefore.totalMs),
    machineBusyMs: cpuAfter.busyMs - cpuBefore.busyMs,
    loadGenCpuMs: (own.user + own.system) / 1000,
    elapsedSec,
  };
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}
