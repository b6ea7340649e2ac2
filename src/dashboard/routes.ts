import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Type } from "@sinclair/typebox";
import type { FastifyReply } from "fastify";
import type { Config } from "../config.ts";
import type { RoutePlugin } from "../context.ts";
import { notFound } from "../http/problem.ts";
import { devSignInEnabled } from "../identity/dev-signin.ts";
import type { TokenVerifier } from "../identity/tokens.ts";

/**
 * The web dashboard: a handful of static files (plain ES modules, HTML, CSS; no build step) served
 * by the service itself under /dashboard. The files are read once at start into a table keyed by
 * name, so a request can only ever name one of them: nothing from the URL reaches the file
 * system, and path traversal has nothing to traverse. The dashboard calls the public API with the
 * developer's token, like any script.
 */

const PUBLIC_DIR = join(dirname(fileURLToPath(import.meta.url)), "public");
const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
  json: "application/json; charset=utf-8",
};
/** Names a file of the dashboard may have: flat, lower-case, one of the types above. */
const FILE_NAME = /^[a-z0-9][a-z0-9-]{0,62}\.(html|js|css|svg)$/;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

function asset(body: Buffer, ext: string): Asset {
  const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
  return { body, type: TYPES[ext]!, etag };
}

/** The dashboard's files, plus the QR code encoder (the `uqr` package, one self-contained module). */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(PUBLIC_DIR)) {
    const m = FILE_NAME.exec(name);
    if (m) assets.set(name, asset(readFileSync(join(PUBLIC_DIR, name)), m[1]!));
  }
  // `uqr` exports its CommonJS build to require(); the ES module sits beside it.
  const uqrCjs = createRequire(import.meta.url).resolve("uqr");
  assets.set("uqr.js", asset(readFileSync(join(dirname(uqrCjs), "index.mjs")), "js"));
  return assets;
}

/** What the page needs to know to sign in; public, like the provider's own discovery document. */
export function dashboardSettings(config: Config, tokens: TokenVerifier) {
  const oidc =
    config.oidc && config.dashboard.oidcClientId
      ? {
          issuer: config.oidc.issuer,
          clientId: config.dashboard.oidcClientId,
          scope: config.dashboard.oidcScope,
          audience: config.oidc.audience,
        }
      : null;
  return {
    signIn: oidc ? "oidc" : devSignInEnabled(config, tokens) ? "dev" : "token",
    oidc,
    devSignIn: devSignInEnabled(config, tokens) ? config.dashboard.devSignIn : "off",
    chains: config.chains
      .filter((c) => c.active)
      .map((c) => ({ chainId: c.chainId, name: c.name, nativeCurrency: c.nativeCurrency })),
  };
}

/**
 * A strict policy: only the dashboard's own scripts and styles, no inline code, no framing. The
 * identity provider's origin is reachable for discovery and the token exchange (the sign-in
 * redirect itself is a navigation, which connect-src does not govern).
 */
export function contentSecurityPolicy(config: Config): string {
  const connect = ["'self'"];
  if (config.oidc && config.dashboard.oidcClientId) connect.push(new URL(config.oidc.issuer).origin);
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect.join(" ")}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export const dashboardRoutes: RoutePlugin = async (app, { services }) => {
  const assets = loadAssets();
  const csp = contentSecurityPolicy(services.config);
  const publicSettings = dashboardSettings(services.config, services.tokens);
  const settings = asset(Buffer.from(JSON.stringify(publicSettings)), "json");
  const tags = ["dashboard"];

  const secure = (reply: FastifyReply) =>
    reply
      .header("content-security-policy", csp)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("x-frame-options", "DENY")
      .header("cross-origin-opener-policy", "same-origin");

  const send = (reply: FastifyReply, file: Asset, ifNoneMatch: string | undefined) => {
    secure(reply)
      // Revalidated on every use (cheap: a 304 by ETag), so a new version is seen at once
      // without hashed file names and a build step.
      .header("cache-control", "no-cache")
      .header("etag", file.etag);
    if (ifNoneMatch === file.etag) return reply.code(304).send();
    return reply.type(file.type).send(file.body);
  };

  // Documented as what they are (files, revalidated by ETag), so the document lists a success.
  const fileResponses = (types: string[]) => ({
    200: {
      description: "The file",
      content: Object.fromEntries(types.map((t) => [t, { schema: { type: "string" } }])),
    },
    304: { description: "Not modified since the ETag in If-None-Match", type: "null" },
  });

  app.get(
    "/dashboard",
    {
      schema: {
        tags,
        summary: "The web dashboard (an HTML page; sign in from there)",
        response: fileResponses(["text/html"]),
      },
    },
    async (request, reply) => send(reply, assets.get("index.html")!, request.headers["if-none-match"]),
  );

  app.get(
    "/dashboard/:file",
    {
      schema: {
        tags,
        summary: "The dashboard's scripts, styles and settings (static files)",
        description:
          "`settings.json` asked with a developer's token also carries `operator` (boolean): whether the " +
          "caller is one of the service's operators (`OPERATOR_EMAILS`); that answer is not cached.",
        params: Type.Object({ file: Type.String({ maxLength: 80 }) }, { additionalProperties: false }),
        response: fileResponses(["text/javascript", "text/css", "image/svg+xml", "application/json"]),
      },
    },
    async (request, reply) => {
      const { file } = request.params;
      const principal = request.principal;
      if (file === "settings.json" && principal?.kind === "developer") {
        // Asked with a developer's token (the signed-in page asks once per token): the same
        // settings, and whether this developer is one of the service's operators
        // (OPERATOR_EMAILS), for the page to offer the operators' section only to them. The API
        // still decides: the operators' routes refuse everyone else. Per caller: never cached.
        const operator = services.config.operatorEmails.includes(principal.email);
        return secure(reply)
          .header("cache-control", "no-store")
          .header("vary", "authorization")
          .type(TYPES.json!)
          .send(JSON.stringify({ ...publicSettings, operator }));
      }
      const found = file === "settings.json" ? settings : assets.get(file);
      if (!found) throw notFound("dashboard file");
      return send(reply, found, request.headers["if-none-match"]);
    },
  );
};

/**
 * The provider sends the browser back to /dashboard?code=…&state=…. The page reads them from its
 * own address and removes them at once; the server has no use for them, so they are cut from the
 * URL before anything logs it (Fastify's rewriteUrl, as for API keys in URLs).
 */
export function stripSignInCallback(url: string): string {
  const q = url.indexOf("?");
  if (q === -1) return url;
  const path = url.slice(0, q);
  if (path !== "/dashboard" && path !== "/dashboard/") return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const name of ["code", "state", "session_state", "iss", "error_description"]) params.delete(name);
  const rest = params.toString();
  return rest ? `${path}?${rest}` : path;
}
