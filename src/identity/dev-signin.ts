import { isIP } from "node:net";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import type { Config } from "../config.ts";
import type { RoutePlugin } from "../context.ts";
import { forbidden, invalid } from "../http/problem.ts";
import { normalizeEmail } from "./email.ts";
import type { LocalIssuer, TokenVerifier } from "./tokens.ts";

/** Lifetime of a development token: a working session, like `npm run token`'s. */
const DEV_TOKEN_TTL_SEC = 3600;

/**
 * Whether the development sign-in exists: only with the local issuer (no OIDC), never in
 * production (where the local issuer is refused at start anyway), and not when switched off.
 */
export function devSignInEnabled(
  config: Pick<Config, "env" | "oidc" | "dashboard">,
  tokens: TokenVerifier,
): tokens is LocalIssuer {
  return (
    config.oidc === null &&
    config.env !== "production" &&
    config.dashboard.devSignIn !== "off" &&
    "issue" in tokens
  );
}

/** A loopback client address (IPv4, IPv6, or IPv4 mapped into IPv6). */
export function isLoopback(ip: string): boolean {
  const bare = ip.startsWith("::ffff:") ? ip.slice(7) : ip;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  return bare === "::1";
}

/**
 * Headers that a reverse proxy adds. A request carrying any of them came through a proxy, and a
 * proxy on this host makes every client look local, so `loopback` refuses them all.
 */
const PROXY_HEADERS = [
  "forwarded",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-real-ip",
  "x-client-ip",
  "true-client-ip",
  "cf-connecting-ip",
  "via",
] as const;

/**
 * Whether the request comes from this machine with no proxy in between: the TCP peer itself is
 * a loopback address (never `request.ip`, which TRUST_PROXY lets X-Forwarded-For choose) and no
 * proxy header is present, whatever TRUST_PROXY says.
 */
function cameStraightFromLoopback(request: FastifyRequest): boolean {
  const peer = request.raw.socket?.remoteAddress;
  if (peer === undefined || !isLoopback(peer)) return false;
  return PROXY_HEADERS.every((name) => request.headers[name] === undefined);
}

/**
 * POST /auth/dev-token: the dashboard's sign-in without an identity provider. It mints what
 * `npm run token` mints, from the same local issuer, so anything the dashboard then does a script
 * can do with that command's token. The token travels in the response body only (never a URL or a
 * cookie) and is never logged. By default only loopback clients may ask (DASHBOARD_DEV_SIGNIN):
 * anyone who can reach it can sign in as anyone.
 */
export const devSignInRoutes: RoutePlugin = async (app, { services }) => {
  const { config, tokens } = services;
  if (!devSignInEnabled(config, tokens)) return;
  const issuer = tokens;
  app.post(
    "/auth/dev-token",
    {
      schema: {
        tags: ["dashboard"],
        summary:
          "Development sign-in: a developer token from the local issuer (absent with OIDC and in production)",
        body: Type.Object(
          { email: Type.String({ minLength: 3, maxLength: 254, pattern: "^[^\\s@]{1,64}@[^\\s@]{1,189}$" }) },
          { additionalProperties: false },
        ),
        response: {
          201: Type.Object({
            token: Type.String({ description: "A developer token, for `Authorization: Bearer`" }),
            tokenType: Type.Literal("Bearer"),
            expiresInSec: Type.Integer(),
          }),
        },
      },
    },
    async (request, reply) => {
      if (config.dashboard.devSignIn === "loopback" && !cameStraightFromLoopback(request)) {
        throw forbidden(
          "the development sign-in answers loopback clients only, never through a proxy (DASHBOARD_DEV_SIGNIN=any opens it)",
        );
      }
      const email = normalizeEmail(request.body.email);
      if (email === null) {
        throw invalid("body/email must be a printable-ASCII address outside the reserved .invalid domain");
      }
      const token = await issuer.issue(email, DEV_TOKEN_TTL_SEC);
      reply.header("cache-control", "no-store");
      return reply.code(201).send({ token, tokenType: "Bearer", expiresInSec: DEV_TOKEN_TTL_SEC });
    },
  );
};
