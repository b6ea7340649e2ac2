import { join } from "node:path";
import { localIssuer } from "../src/identity/tokens.ts";
import { type Child, startChild } from "./processes.ts";

/**
 * The webhook scenarios of the bench (issue 11): a receiver (bench/receiver.ts, a process of its
 * own, so that its CPU is reported apart) that approves every sponsorship at once and
 * acknowledges every event, and the API calls that point the bench project's approval webhook
 * and an event endpoint at it.
 */
export interface BenchReceiver {
  url: string;
  child: Child;
  /** How many approval requests and events it answered so far. */
  counts(): Promise<{ approvals: number; events: number; requests: number }>;
  close(): Promise<void>;
}

export async function startBenchReceiver(dataDir: string): Promise<BenchReceiver> {
  const child = await startChild({
    name: "receiver",
    entry: "bench/receiver.ts",
    env: { PATH: process.env.PATH ?? "" },
    logPath: join(dataDir, "receiver.log"),
    readyPath: "/health",
  });
  return {
    url: child.baseUrl,
    child,
    counts: async () =>
      (await (await fetch(`${child.baseUrl}/counts`)).json()) as {
        approvals: number;
        events: number;
        requests: number;
      },
    close: async () => {
      await child.stop();
    },
  };
}

/** Calls the service's API as the bench project's owner. */
export async function ownerCall(
  baseUrl: string,
  dataDir: string,
  runId: string,
  method: string,
  path: string,
  body: unknown,
) {
  const token = await (await localIssuer(dataDir)).issue(`bench-${runId}@example.com`, 3600);
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}
