import { createServer } from "node:http";
import { verifyWebhook } from "../test/support/receiver.ts";

/**
 * The webhook receiver of the bench's webhook scenarios, as a process of its own so that the
 * bench can tell its CPU from the service's and the load generator's ("receiver µs/req"): it
 * approves every sponsorship at once (POST /approve) and acknowledges every event (any other
 * POST; on POST /batched, a batch of events, counted by parsing it as a receiver would);
 * GET /counts says how many of each it answered (events, not requests), GET /health that it is up.
 *
 * POST /approve answers without reading the request, the least a receiver can do. POST
 * /approve-verified does what a studio's receiver must: it checks the request's Standard Webhooks
 * signature against the secret given to POST /secret (401 if it does not match) and parses the
 * body before it approves (bench/approval.ts compares the two).
 */
const counts = { approvals: 0, events: 0, requests: 0 };
let secret: string | null = null;
const server = createServer((req, res) => {
  const read = req.method === "POST" && ["/batched", "/approve-verified", "/secret"].includes(req.url ?? "");
  const chunks: Buffer[] = [];
  if (read) req.on("data", (c: Buffer) => chunks.push(c));
  else req.resume();
  req.on("end", () => {
    if (req.method === "GET") {
      const body = req.url === "/counts" ? JSON.stringify(counts) : '{"status":"ok"}';
      res.writeHead(200, { "content-type": "application/json" }).end(body);
    } else if (req.url === "/secret") {
      secret = Buffer.concat(chunks).toString("utf8");
      res.writeHead(204).end();
    } else if (req.url === "/approve") {
      counts.approvals++;
      res.writeHead(200, { "content-type": "application/json" }).end('{"approve":true}');
    } else if (req.url === "/approve-verified") {
      const body = Buffer.concat(chunks).toString("utf8");
      if (secret === null || !verifyWebhook(secret, req.headers, body)) {
        res.writeHead(401).end();
        return;
      }
      JSON.parse(body);
      counts.approvals++;
      res.writeHead(200, { "content-type": "application/json" }).end('{"approve":true}');
    } else {
      counts.requests++;
      counts.events +=
        req.url === "/batched"
          ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { events: unknown[] }).events.length
          : 1;
      res.writeHead(204).end();
    }
  });
});
server.keepAliveTimeout = 30_000;
server.listen(Number(process.env.PORT), process.env.HOST ?? "127.0.0.1");
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
