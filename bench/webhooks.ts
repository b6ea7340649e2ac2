import { createServer, type Server } from "node:http";
import { localIssuer } from "../src/identity/tokens.ts";

/**
 * The webhook scenarios of the bench (issue 11): a receiver in the bench process that approves
 * every sponsorship at once and acknowledges every event, and the API calls that point the bench
 * project's approval webhook and an event endpoint at it.
 */
export interface BenchReceiver {
  url: string;
  approvals: number;
  events: number;
  close(): Promise<void>;
}

export async function startBenchReceiver(): Promise<BenchReceiver> {
  const counts = { approvals: 0, events: 0 };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/approve") {
        counts.approvals++;
        res.writeHead(200, { "content-type": "application/json" }).end('{"approve":true}');
      } else {
        counts.events++;
        res.writeHead(204).end();
      }
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return Object.assign(counts, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
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
