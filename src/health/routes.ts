import { Type } from "@sinclair/typebox";
import type { RoutePlugin } from "../context.ts";
import { responses, Timestamp } from "../http/schemas.ts";

const Check = Type.Object({
  status: Type.Union([Type.Literal("ok"), Type.Literal("degraded"), Type.Literal("down")]),
  detail: Type.Optional(Type.String()),
});

export interface ReadinessProbe {
  name: string;
  /** Resolves with the dependency's state; must not throw. */
  check(): Promise<{ status: "ok" | "degraded" | "down"; detail?: string }>;
}

export const healthRoutes: RoutePlugin = async (app, { services }) => {
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
        summary: "Readiness: database, rate-limit store and chains; 503 when one is down",
        response: {
          200: Type.Object({ status: Type.String(), checks: Type.Record(Type.String(), Check) }),
          503: Type.Object({ status: Type.String(), checks: Type.Record(Type.String(), Check) }),
        },
      },
    },
    async (_request, reply) => {
      const results = await Promise.all(
        services.readiness.map(async (p) => [p.name, await p.check()] as const),
      );
      const checks = Object.fromEntries(results);
      const down = results.some(([, r]) => r.status === "down");
      const degraded = results.some(([, r]) => r.status === "degraded");
      return reply
        .code(down ? 503 : 200)
        .send({ status: down ? "unavailable" : degraded ? "degraded" : "ok", checks });
    },
  );
};
