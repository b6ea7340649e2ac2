import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from "fastify";
import { allowlistRoutes } from "./allowlists/routes.ts";
import { analyticsRoutes } from "./analytics/routes.ts";
import { apiKeyRoutes } from "./api-keys/routes.ts";
import { chainRoutes } from "./chains/routes.ts";
import type { Services } from "./context.ts";
import { fundingRoutes } from "./funding/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { installErrorHandling } from "./http/errors.ts";
import { Problem } from "./http/problem.ts";
import { validatorCompiler } from "./http/validation.ts";
import { installAuthentication } from "./identity/authenticate.ts";
import { parityRoutes } from "./ledger/routes.ts";
import { orgRoutes } from "./orgs/routes.ts";
import { projectRoutes } from "./projects/routes.ts";
import { rpcRoutes } from "./rpc/routes.ts";
import { stripUrlKey } from "./rpc/url-key.ts";
import { settlementRoutes } from "./settlement/routes.ts";
import { sponsorRoutes } from "./sponsor/routes.ts";

export const BODY_LIMIT_BYTES = 64 * 1024;

export interface AppOptions {
  services: Services;
  /** Logger options (pino) or false; or a ready logger instance (tests capture logs with one). */
  logger?: FastifyServerOptions["logger"];
  loggerInstance?: FastifyBaseLogger;
}

/** Builds the HTTP app from its dependencies. It never listens: server.ts does, tests inject. */
export async function buildApp({
  services,
  logger = false,
  loggerInstance,
}: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    ...(loggerInstance ? { loggerInstance } : { logger }),
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => crypto.randomUUID(),
    requestIdHeader: false,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: true },
    // API keys carried in URLs (?apikey=, for EIP-5792 wallets) leave the URL before anything logs it.
    rewriteUrl: (req) => stripUrlKey(req),
  }).withTypeProvider<TypeBoxTypeProvider>();

  // JSON only: any other body type is refused with 415 instead of reaching a handler as text.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    "application/json",
    { parseAs: "string" },
    app.getDefaultJsonParser("error", "error"),
  );
  app.setValidatorCompiler(validatorCompiler());
  app.addSchema(Problem);
  installErrorHandling(app);
  app.addHook("onSend", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Gas Sponsorship Service",
        version: services.version,
        description:
          "Authorizes sponsored ERC-4337 user operations and manages projects, keys and gas tanks.",
      },
      components: {
        securitySchemes: {
          bearer: {
            type: "http",
            scheme: "bearer",
            description: "An API key (gsk_...) or a developer's identity-provider token (JWT).",
          },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  installAuthentication(app, services);
  for (const routes of [
    healthRoutes,
    chainRoutes,
    orgRoutes,
    projectRoutes,
    apiKeyRoutes,
    allowlistRoutes,
    fundingRoutes,
    analyticsRoutes,
    parityRoutes,
    settlementRoutes,
    sponsorRoutes,
    rpcRoutes,
  ]) {
    await app.register(routes, { services });
  }
  return app;
}
