import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { checkApiKey } from "../api-keys/check.ts";
import { KEY_PREFIX } from "../api-keys/format.ts";
import type { Services } from "../context.ts";
import { ApiError, rateLimited } from "../http/problem.ts";
import type { RateLimitRefusal } from "../rate-limits/limiter.ts";
import { resolveDeveloper } from "./developers.ts";
import type { Principal } from "./principal.ts";
import { urlKeyOf } from "./url-key.ts";

const MAX_CREDENTIAL_LENGTH = 8192;

/**
 * Establishes `request.principal` from `Authorization: Bearer ...`: an API key when it starts
 * with `gsk_`, a developer token otherwise. It runs before the body is parsed, so a bad
 * credential is refused (401) and rate limited (429) before any body validation (400), the
 * order DESIGN.md fixes. A request without credentials gets a null principal; each route then
 * demands what it needs, so public routes stay public.
 *
 * Every request made with a key counts against the key's budget, every request made with a
 * token against the developer's (DEVELOPER_RATE_LIMIT), and every failed authentication against
 * the client address's (FAILED_AUTH_LIMIT): past it, the address's bad credentials are answered
 * 429 without being looked up, while its valid ones are still served.
 */
export function installAuthentication(app: FastifyInstance, services: Services) {
  app.decorateRequest("principal", null);
  // Most routes authenticate before the body is read; a route that answers every failure in its
  // own protocol (JSON-RPC at /rpc, which needs the request's id) asks for it after (preHandler),
  // through the same code, and its error handler maps the refusals.
  // Callback hooks: the stage that does not apply answers at once, without a promise.
  const at =
    (stage: "onRequest" | "preHandler") =>
    (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      if (stageOf(request) !== stage) done();
      else establishPrincipal(request, services).then(() => done(), done);
    };
  app.addHook("onRequest", at("onRequest"));
  app.addHook("preHandler", at("preHandler"));
}

function stageOf(request: FastifyRequest): "onRequest" | "preHandler" | null {
  const config = request.routeOptions.config;
  // A route with a credential of its own (METRICS_TOKEN at /metrics) checks it itself.
  if (config?.ownAuthentication) return null;
  return config?.credentials?.afterBody ? "preHandler" : "onRequest";
}

async function establishPrincipal(request: FastifyRequest, services: Services): Promise<void> {
  request.principal = await principalOf(request, services);
  const principal = request.principal;
  if (principal?.kind === "apiKey") {
    const refusal = await services.rateLimiter.consume(principal.keyId, principal.rateLimit);
    if (refusal) throw rateLimited(refusal);
  } else if (principal?.kind === "developer") {
    const refusal = await services.developerRateLimiter.consume(
      principal.developerId,
      services.config.developerRateLimit,
    );
    if (refusal) throw rateLimited(refusal, "this developer's budget");
  }
}

/**
 * The credential readers: `Authorization: Bearer`, and for a route that allows it (the ERC-7677
 * endpoint, for wallets that take a paymaster service as a URL) an API key in `?apikey=`, cut
 * out of the URL before anything logged it (url-key.ts). Only an API key is taken from a URL.
 */
async function principalOf(request: FastifyRequest, services: Services): Promise<Principal | null> {
  const header = request.headers.authorization;
  let credential: string;
  if (header !== undefined) {
    const match = /^Bearer ([!-~]+)$/.exec(header);
    if (!match || match[1]!.length > MAX_CREDENTIAL_LENGTH) {
      return refuse(services, request, "expected 'Authorization: Bearer <credential>'");
    }
    credential = match[1]!;
  } else {
    const fromUrl = request.routeOptions.config?.credentials?.fromUrl ? urlKeyOf(request.raw) : undefined;
    if (fromUrl === undefined) return null;
    if (!fromUrl.startsWith(KEY_PREFIX) || fromUrl.length > MAX_CREDENTIAL_LENGTH) {
      return refuse(services, request, "a URL carries only a project's API key (?apikey=gsk_…)");
    }
    credential = fromUrl;
  }
  if (credential.startsWith(KEY_PREFIX)) {
    const check = await checkApiKey(services, credential, request.ip);
    if (check.kind === "throttled") throw tooManyFailures(check.refusal);
    if (check.kind === "invalid") throw unauthorized("the API key is invalid or revoked");
    const { key } = check;
    return {
      kind: "apiKey",
      keyId: key.id,
      projectId: key.projectId,
      scopes: key.scopes,
      rateLimit: key.rateLimit,
    };
  }
  const identity = await services.tokens.verify(credential);
  if (!identity) return refuse(services, request, "the access token is invalid or expired");
  const developer = await resolveDeveloper(services.db, identity);
  // The email belongs to another subject (another account at the provider): never merge them.
  if (developer === null)
    throw new ApiError("identity_conflict", "this email is already linked to another identity");
  // The address on record, not the token's: it is the verified one (or a placeholder).
  return { kind: "developer", developerId: developer.id, email: developer.email };
}

/** A failed authentication: counted against the client address, then 401 (or 429 past its budget). */
async function refuse(services: Services, request: FastifyRequest, detail: string): Promise<never> {
  const refusal = await services.authFailures.reserve(request.ip);
  throw refusal ? tooManyFailures(refusal) : unauthorized(detail);
}

/** The 429 for a client address over its budget of failed authentications. */
export function tooManyFailures(refusal: RateLimitRefusal): ApiError {
  const { headers } = rateLimited(refusal);
  return new ApiError(
    "rate_limited",
    `too many failed authentications from this address (${refusal.perMinute} per minute allowed); ` +
      `retry in ${refusal.retryAfterSec} s`,
    headers,
  );
}

const unauthorized = (detail: string) => new ApiError("unauthorized", detail, wwwAuthenticate);

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route checks a credential of its own (neither an API key nor a developer token). */
    ownAuthentication?: boolean;
    /**
     * How the route takes the usual credentials: `fromUrl` also reads an API key in `?apikey=`;
     * `afterBody` authenticates once the body is read (preHandler) instead of before.
     */
    credentials?: { fromUrl?: boolean; afterBody?: boolean };
  }
}

const wwwAuthenticate = { "www-authenticate": 'Bearer realm="gas-sponsorship"' };

/** The caller, or 401 when the request carried no credential at all. */
export function requirePrincipal(request: FastifyRequest): Principal {
  if (!request.principal) {
    throw new ApiError("unauthorized", "missing 'Authorization: Bearer <credential>'", wwwAuthenticate);
  }
  return request.principal;
}

export function requireDeveloper(request: FastifyRequest): Extract<Principal, { kind: "developer" }> {
  const principal = requirePrincipal(request);
  if (principal.kind !== "developer") {
    throw new ApiError("forbidden", "this route needs a developer token, not an API key");
  }
  return principal;
}
