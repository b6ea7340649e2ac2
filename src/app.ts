import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
  LogController,
} from "fastify";
import { allowlistRoutes } from "./allowlists/routes.ts";
import { analyticsRoutes } from "./analytics/routes.ts";
import { apiKeyRoutes } from "./api-keys/routes.ts";
import { chainRoutes } from "./chains/routes.ts";
import type { Services } from "./context.ts";
import { contractRoutes } from "./contracts/routes.ts";
import { dashboardRoutes, stripSignInCallback } from "./dashboard/routes.ts";
import { fundingRoutes } from "./funding/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { clientErrorHandler, installServerEvents } from "./http/client-errors.ts";
import { frameworkErrors, installErrorHandling } from "./http/errors.ts";
import { documentRoute } from "./http/openapi.ts";
import { Problem } from "./http/problem.ts";
import { serializerFactory, validatorCompiler } from "./http/validation.ts";
import { installAuthentication } from "./identity/authenticate.ts";
import { devSignInRoutes } from "./identity/dev-signin.ts";
import { stripUrlKey } from "./identity/url-key.ts";
import { parityRoutes } from "./ledger/routes.ts";
import { installRequestObservability, requestIdOf, trustProxyOption } from "./metrics/http.ts";
import { lazyChildLogger } from "./metrics/request-logger.ts";
import { orgRoutes } from "./orgs/routes.ts";
import { policyRoutes } from "./policies/routes.ts";
import { projectRoutes } from "./projects/routes.ts";
import { refusalRoutes } from "./refusals/routes.ts";
import { rpcRoutes } from "./rpc/routes.ts";
import { settlementRoutes } from "./settlement/routes.ts";
import { sponsorRoutes } from "./sponsor/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

export const BODY_LIMIT_BYTES = 64 * 1024;

const API_TAGS = [
  { name: "health", description: "Liveness and readiness, for load balancers and operators." },
  { name: "chains", description: "The chains the service sponsors on, and operators' chain parity." },
  { name: "organizations", description: "Organizations and their members, for signed-in developers." },
  { name: "projects", description: "Projects: settings, the gas tank balance." },
  { name: "api keys", description: "A project's API keys; the full key is shown once." },
  { name: "allowlist", description: "The (contract, function) pairs a project sponsors." },
  {
    name: "policies",
    description: "A project's sponsorship rules: caps per sender and project, campaign, sender lists.",
  },
  { name: "funding", description: "Deposit addresses that fund a project's gas tank." },
  { name: "analytics", description: "What a project sponsored and refused: totals, events, refusals." },
  { name: "funds parity", description: "Proof that cached balances equal the ledger." },
  { name: "sponsorship", description: "Authorizing sponsored user operations: REST and ERC-7677." },
  {
    name: "webhooks",
    description: "Event webhooks, their delivery log, the approval webhook, balance alerts.",
  },
  { name: "dashboard", description: "The web dashboard's files and its development sign-in." },
];

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
    // One line per request at `info`, written by installRequestObservability (metrics/http.ts)
    // instead of Fastify's two; the arrival line only at `debug`.
    logController: new LogController({ disableRequestLogging: true }),
    // A request's logger is a pino child only once something logs through it (request-logger.ts).
    childLoggerFactory: lazyChildLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    // The caller's x-request-id when it is safe to log (metrics/http.ts), a fresh UUID otherwise.
    genReqId: requestIdOf,
    requestIdHeader: false,
    // TRUST_PROXY: request.ip is the client's behind the configured load balancers.
    trustProxy: trustProxyOption(services.config.trustProxy),
    // While closing, a request that still arrives on an open connection is served (the
    // database closes only after the app) with `Connection: close`, instead of Fastify's own
    // non-problem 503: draining loses nothing.
    return503OnClosing: false,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: true },
    // API keys carried in URLs (?apikey=, for EIP-5792 wallets) leave the URL before anything logs it.
    // So are the sign-in code and state the identity provider sends the dashboard back with.
    rewriteUrl: (req) => stripSignInCallback(stripUrlKey(req)),
    // Every refusal is problem+json, including those raised before a route is chosen (a bad
    // URL, a long path segment), by Node's HTTP parser, and for a missing Host (Node's own
    // answer would be a bare 400; installErrorHandling refuses it instead).
    frameworkErrors,
    clientErrorHandler,
    http: { requireHostHeader: false },
    schemaController: { compilersFactory: { buildSerializer: serializerFactory } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  installServerEvents(app.server, app.log);

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
  app.addHook("onSend", (request, reply, payload, done) => {
    reply.header("x-request-id", request.id);
    done(null, payload);
  });

  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Gas Sponsorship Service",
        version: services.version,
        description:
          "Authorizes sponsored ERC-4337 user operations and manages projects, keys and gas tanks. " +
          "Every error is application/problem+json with a stable `code`; each operation lists the codes it can answer.",
        license: { name: "Proprietary", url: "https://docs.gas-sponsorship.dev/license" },
      },
      servers: [
        { url: "/", description: "The host serving this document (npm start: http://localhost:3000)" },
      ],
      tags: API_TAGS,
      components: {
        securitySchemes: {
          bearer: {
            type: "http",
            scheme: "bearer",
            description: "An API key (gsk_...) or a developer's identity-provider token (JWT).",
          },
          apiKeyQuery: {
            type: "apiKey",
            in: "query",
            name: "apikey",
            description:
              "A project's API key in the URL, for EIP-5792 wallets that only take a paymaster URL (/rpc only; never logged).",
          },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: "/docs" });

  // Every route gets its operationId, access, and error responses from ROUTE_DOCS.
  app.addHook("onRoute", documentRoute);
  installAuthentication(app, services);
  // Request metrics, and who called and how it ended on every request's log lines.
  installRequestObservability(app, services.metrics, { successLogEvery: services.config.requestLogEvery });
  for (const routes of [
    healthRoutes,
    chainRoutes,
    orgRoutes,
    projectRoutes,
    apiKeyRoutes,
    allowlistRoutes,
    contractRoutes,
    policyRoutes,
    fundingRoutes,
    analyticsRoutes,
    refusalRoutes,
    parityRoutes,
    settlementRoutes,
    sponsorRoutes,
    rpcRoutes,
    webhookRoutes,
    devSignInRoutes,
    dashboardRoutes,
  ]) {
    await app.register(routes, { services });
  }
  return app;
}
