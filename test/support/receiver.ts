/**
 * A real HTTP receiver for webhook tests: a node:http server on a free local port that records
 * every request (headers and raw body) and answers as the test scripts it: a status and body (at
 * once or after a delay), or holding the request open until the test lets it go. It counts the
 * requests open at each moment, as the receiver sees them: from arrival until the answer is sent
 * or the sender drops the connection.
 */
import assert from "node:assert/strict";
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { TestApp } from "./app.ts";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

export type Answer = { status: number; body?: string; delayMs?: number } | { hold: true };

export interface Receiver {
  url: string;
  received: Received[];
  /** How the next requests are answered, in order; once used up, `fallback`. */
  script: Answer[];
  fallback: Answer;
  /** Requests being held open. */
  held: ServerResponse[];
  /** Requests open now (arrived, not answered, connection still up). */
  open: number;
  /** The most requests that were open at once. */
  peakOpen: number;
  /** Answers every held request with this status (or drops the connections when null). */
  releaseHeld(status: number | null): void;
  /** Resolves once `n` requests have arrived in all. */
  waitFor(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(fallback: Answer = { status: 200, body: "{}" }): Promise<Receiver> {
  const waiters: { n: number; resolve: () => void }[] = [];
  const r = {
    received: [] as Received[],
    script: [] as Answer[],
    fallback,
    held: [] as ServerResponse[],
    open: 0,
    peakOpen: 0,
  };
  const server = createServer((req, res) => {
    r.open++;
    r.peakOpen = Math.max(r.peakOpen, r.open);
    // 'close' comes once: after the answer is sent, or when the connection goes first.
    res.on("close", () => r.open--);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      r.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      for (const w of [...waiters]) {
        if (r.received.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
      const answer = r.script.shift() ?? r.fallback;
      if ("hold" in answer) {
        r.held.push(res);
        return;
      }
      const reply = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, { "content-type": "application/json" }).end(answer.body ?? "{}");
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return Object.assign(r, {
    url: `http://127.0.0.1:${port}/hook`,
    releaseHeld(status: number | null) {
      for (const res of r.held.splice(0)) {
        if (status === null) res.destroy();
        else if (!res.writableEnded && !res.destroyed) res.writeHead(status).end("{}");
      }
    },
    waitFor(n: number) {
      if (r.received.length >= n) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ n, resolve }));
    },
    async close() {
      for (const res of r.held.splice(0)) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  }) as Receiver;
}

/**
 * Subscribes `url` to the project's events through the API (201 asserted) and registers the
 * signing secret with the app's secret watch, so that a log line carrying it fails the test.
 */
export async function addWebhookEndpoint(
  t: Pick<TestApp, "request" | "secrets">,
  p: { projectId: string; ownerToken: string },
  url: string,
  eventTypes: string[] = ["*"],
  more: Record<string, unknown> = {},
): Promise<{ id: number; secret: string }> {
  const res = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/webhooks`,
    token: p.ownerToken,
    payload: { url, eventTypes, ...more },
  });
  assert.equal(res.statusCode, 201, res.body);
  const body = res.json() as { id: number; secret: string };
  t.secrets.add(body.secret);
  return body;
}

/**
 * What a receiver does with nothing but the secret (`whsec_…`), node:crypto and the Standard
 * Webhooks recipe: one of the request's `v1` signatures is the HMAC-SHA256 of `<id>.<timestamp>.<body>`.
 */
export function verifyWebhook(secret: string, headers: IncomingHttpHeaders, body: string): boolean {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const expected = createHmac("sha256", key)
    .update(`${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`)
    .digest();
  return String(headers["webhook-signature"] ?? "")
    .split(" ")
    .some((entry) => {
      const [version, b64] = entry.split(",");
      const given = Buffer.from(b64 ?? "", "base64");
      return version === "v1" && given.length === expected.length && timingSafeEqual(given, expected);
    });
}

/** An endpoint's delivery log through the API: its latest 200 deliveries, each as `D` (200 asserted). */
export async function deliveryLog<D>(
  t: Pick<TestApp, "request">,
  p: { projectId: string; ownerToken: string },
  endpointId: number,
): Promise<D[]> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/webhooks/${endpointId}/deliveries?limit=200`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { deliveries: D[] }).deliveries;
}
