import type { FastifyInstance, FastifyRequest } from "fastify";
import { KEY_PREFIX } from "../api-keys/format.ts";
import type { Services } from "../context.ts";
import { ApiError, rateLimited } from "../http/problem.ts";
import { resolveDeveloper } from "./developers.ts";
import type { Principal } from "./principal.ts";

const MAX_CREDENTIAL_LENGTH = 8192;

/**
 * Establishes `request.principal` from `Authorization: Bearer ...`: an API key when it starts
 * with `gsk_`, a developer token otherwise. It runs before the body is parsed, so a bad
 * credential is refused (401) and rate limited (429) before any body validation (400), the
 * order DESIGN.md fixes. A request without credentials gets a null principal; each route then
 * demands what it needs, so public routes stay public.
 */
export function installAuthentication(app: FastifyInstance, services: Services) {
  app.decorateRequest("principal", null);
  app.addHook("onRequest", async (request) => {
    // A route that speaks another protocol (JSON-RPC at /rpc) authenticates in its own terms.
    if (request.routeOptions.config?.ownAuthentication) return;
    request.principal = await principalOf(request, services);
    if (request.principal?.kind === "apiKey") {
      const refusal = await services.rateLimiter.consume(
        request.principal.keyId,
        request.principal.rateLimit,
      );
      if (refusal) throw rateLimited(refusal);
    }
  });
}

async function principalOf(request: FastifyRequest, services: Services): Promise<Principal | null> {
  const header = request.headers.authorization;
  if (header === undefined) return null;
  const match = /^Bearer ([!-~]+)$/.exec(header);
  if (!match || match[1]!.length > MAX_CREDENTIAL_LENGTH) {
    throw new ApiError("unauthorized", "expected 'Authorization: Bearer <credential>'", wwwAuthenticate);
  }
  const credential = match[1]!;
  if (credential.startsWith(KEY_PREFIX)) {
    const key = await services.apiKeys.resolve(credential);
    if (!key) throw new ApiError("unauthorized", "the API key is invalid or revoked", wwwAuthenticate);
    return {
      kind: "apiKey",
      keyId: key.id,
      projectId: key.projectId,
      scopes: key.scopes,
      rateLimit: key.rateLimit,
    };
  }
  const identity = await services.tokens.verify(credential);
  if (!identity)
    throw new ApiError("unauthorized", "the access token is invalid or expired", wwwAuthenticate);
  const developerId = await resolveDeveloper(services.db, identity);
  // The email belongs to another subject (another account at the provider): never merge them.
  if (developerId === null)
    throw new ApiError("identity_conflict", "this email is already linked to another identity");
  return { kind: "developer", developerId, email: identity.email };
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route authenticates and rate-limits the caller itself. */
    ownAuthentication?: boolean;
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
