import { createHash, timingSafeEqual } from "node:crypto";
import { Type } from "@sinclair/typebox";
import type { RoutePlugin } from "../context.ts";
import { ApiError } from "../http/problem.ts";
import { responses, Timestamp } from "../http/schemas.ts";
import { readinessMonitor } from "./readiness.ts";

export type { CheckResult, ReadinessProbe } from "./readiness.ts";

const Check = Type.Object({
  status: Type.Union([Type.Literal("ok"), Type.Literal("degraded"), Type.Literal("down")]),
  detail: Type.Optional(Type.String()),
});

/** Each dependency's state by name; the names depend on what is configured. */
const Checks = Type.Record(Type.String(), Check, {
  examples: [
    {
      database: { status: "ok" },
      redis: { status: "ok" },
      "chain:14601": { status: "ok" },
      "chain:14601:settlement": { status: "degraded", detail: "12 blocks behind the chain head" },
    },
  ],
});
const Readiness = Type.Object({ status: Type.String(), checks: Checks });

export const healthRoutes: RoutePlugin = async (app, { services }) => {
  // One monitor per app: the route, /metrics and the background timer share its transitions.
  const readiness = readinessMonitor(services.readiness, { log: app.log, metrics: services.metrics });
  app.addHook("onReady", async () => readiness.start(services.config.readinessIntervalMs));
  app.addHook("onClose", async () => readiness.stop());

  app.get(
    "/health",
    {
      schema: {
        tags: ["health"],
        summary: "Liveness",
        response: responses({
          200: Type.Object({
            status: Type.String(),
            timestamp: Timestamp,
            service: Type.String(),
            version: Type.String(),
          }),
        }),
      },
    },
    async () => ({
      status: "ok",
      timestamp: new Date(services.now()).toISOString(),
      service: "gas-sponsorship-service",
      version: services.version,
    }),
  );

  app.get(
    "/health/ready",
    {
      schema: {
        tags: ["health"],
        summary:
          "Readiness to serve authorize: 503 only when the database is down; degraded (200) when Redis, a chain's RPC or a paymaster's deposit or stake is not right",
        response: {
          200: Readiness,
          503: Readiness,
        },
      },
    },
    async (_request, reply) => {
      const report = await readiness.evaluate();
      return reply.code(report.status === "unavailable" ? 503 : 200).send(report);
    },
  );

  const token = services.config.metricsToken;
  const tokenDigest = token === null ? null : sha256(token);
  app.get(
    "/metrics",
    {
      // Its own credential (METRICS_TOKEN), not an API key or a developer token.
      config: { ownAuthentication: true },
      schema: {
        tags: ["health"],
        summary: "Prometheus metrics (text exposition); Authorization: Bearer METRICS_TOKEN when that is set",
        description:
          "Requests and latency by route, authorization outcomes by code, reservation batch sizes, watcher lag and leadership, unattributed spend, paymaster deposits against the gas tanks and open reservations (amounts in ether, float), readiness checks, webhook delivery attempts by outcome with their durations, deliveries given up on and the pending backlog, approval webhook calls by result with their durations, and the process's own metrics. Open unless METRICS_TOKEN is set: keep it on the internal network.",
        response: {
          200: {
            description: "Prometheus text exposition format 0.0.4",
            content: { "text/plain": { schema: { type: "string" } } },
          },
        },
      },
    },
    async (request, reply) => {
      if (tokenDigest !== null) {
        const match = /^Bearer ([!-~]+)$/.exec(request.headers.authorization ?? "");
        if (!match || !timingSafeEqual(sha256(match[1]!), tokenDigest)) {
          throw new ApiError("unauthorized", "the metrics need 'Authorization: Bearer <METRICS_TOKEN>'", {
            "www-authenticate": 'Bearer realm="metrics"',
          });
        }
      }
      // The gauges read by the readiness checks (lag, deposits, unattributed spend) are fresh.
      await readiness.evaluate();
      return reply.type(services.metrics.contentType).send(await services.metrics.exposition());
    },
  );
};

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}
