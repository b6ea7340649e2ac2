/**
 * The dashboard's sign-in with an identity provider, in headless Chromium: the authorization-code
 * flow with PKCE against a small provider of our own (discovery, authorize, token, JWKS), the
 * service verifying the provider's tokens as in production. The code never reaches a log or stays
 * in the address bar, the verifier is checked by the provider, a forged answer is refused, and the
 * development sign-in does not exist. Also: the dashboard's money formatting is exact (BigInt),
 * checked against viem for any amount.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import type { Page } from "playwright-core";
import { formatUnits as viemFormatUnits } from "viem";
import { startTestApp, type TestApp } from "./support/app.ts";
import { type Browser, launchBrowser, screenshot } from "./support/dashboard.ts";

const CLIENT_ID = "gss-dashboard";
const AUDIENCE = "gas-sponsorship-api";
const EMAIL = "oidc-dev@example.com";

interface Provider {
  issuer: string;
  /** Every authorize request's parameters, and every code issued. */
  authorizeRequests: URLSearchParams[];
  codes: string[];
  tokenRequests: URLSearchParams[];
  server: Server;
}

/** A minimal OpenID provider that signs in EMAIL at once (no login form). */
async function startProvider(): Promise<Provider> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  const pending = new Map<string, { challenge: string; redirectUri: string; clientId: string }>();
  const provider = { authorizeRequests: [], codes: [], tokenRequests: [] } as unknown as Provider;
  const cors = { "access-control-allow-origin": "*", "content-type": "application/json" };
  provider.server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", provider.issuer);
    if (url.pathname === "/.well-known/openid-configuration") {
      res.writeHead(200, cors).end(
        JSON.stringify({
          issuer: provider.issuer,
          authorization_endpoint: `${provider.issuer}/authorize`,
          token_endpoint: `${provider.issuer}/token`,
          jwks_uri: `${provider.issuer}/jwks`,
          code_challenge_methods_supported: ["S256"],
        }),
      );
    } else if (url.pathname === "/jwks") {
      res.writeHead(200, cors).end(JSON.stringify({ keys: [jwk] }));
    } else if (url.pathname === "/authorize") {
      const p = url.searchParams;
      provider.authorizeRequests.push(p);
      const code = randomBytes(16).toString("hex");
      provider.codes.push(code);
      pending.set(code, {
        challenge: p.get("code_challenge") ?? "",
        redirectUri: p.get("redirect_uri") ?? "",
        clientId: p.get("client_id") ?? "",
      });
      const back = new URL(p.get("redirect_uri") ?? "");
      back.searchParams.set("code", code);
      back.searchParams.set("state", p.get("state") ?? "");
      res.writeHead(302, { location: back.toString() }).end();
    } else if (url.pathname === "/token" && req.method === "POST") {
      let body = "";
      for await (const chunk of req) body += chunk;
      const form = new URLSearchParams(body);
      provider.tokenRequests.push(form);
      const grant = pending.get(form.get("code") ?? "");
      pending.delete(form.get("code") ?? "");
      const verifier = form.get("code_verifier") ?? "";
      const challenge = createHash("sha256").update(verifier).digest("base64url");
      if (
        !grant ||
        grant.challenge !== challenge ||
        grant.redirectUri !== form.get("redirect_uri") ||
        grant.clientId !== form.get("client_id")
      ) {
        res.writeHead(400, cors).end(JSON.stringify({ error: "invalid_grant" }));
        return;
      }
      const accessToken = await new SignJWT({ email: EMAIL, email_verified: true })
        .setProtectedHeader({ alg: "RS256", kid: "k1" })
        .setIssuer(provider.issuer)
        .setAudience(AUDIENCE)
        .setSubject("user-42")
        .setIssuedAt()
        .setExpirationTime("10m")
        .sign(privateKey);
      res.writeHead(200, cors).end(JSON.stringify({ access_token: accessToken, token_type: "Bearer" }));
    } else {
      res.writeHead(404).end();
    }
  });
  provider.server.listen(0, "127.0.0.1");
  await once(provider.server, "listening");
  const address = provider.server.address();
  provider.issuer = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  return provider;
}

let idp: Provider;
let t: TestApp;
let baseUrl: string;
let b: Browser;
let page: Page;

before(async () => {
  idp = await startProvider();
  t = await startTestApp({
    env: {
      OIDC_ISSUER: idp.issuer,
      OIDC_AUDIENCE: AUDIENCE,
      OIDC_JWKS_URL: `${idp.issuer}/jwks`,
      DASHBOARD_OIDC_CLIENT_ID: CLIENT_ID,
    },
  });
  baseUrl = await t.app.listen({ port: 0, host: "127.0.0.1" });
  b = await launchBrowser(baseUrl);
  page = b.page;
});

after(async () => {
  for (const code of idp?.codes ?? []) t?.secrets.add(code);
  await b?.close();
  await t?.close();
  idp?.server.close();
});

describe("the dashboard's sign-in with an identity provider", () => {
  test("authorization code with PKCE: signed in, the code off the address bar and out of the logs", async () => {
    await page.goto(`${baseUrl}/dashboard#/projects`);
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    await page.getByRole("button", { name: "Sign in with the identity provider" }).click();
    await page.getByRole("heading", { level: 1, name: "Projects" }).waitFor();
    assert.equal(await page.locator("#user .who").textContent(), EMAIL);
    await screenshot(page, "oidc-signed-in");

    const [authorize] = idp.authorizeRequests;
    assert.equal(authorize?.get("response_type"), "code");
    assert.equal(authorize?.get("client_id"), CLIENT_ID);
    assert.equal(authorize?.get("redirect_uri"), `${baseUrl}/dashboard`);
    assert.equal(authorize?.get("code_challenge_method"), "S256");
    assert.match(authorize?.get("state") ?? "", /^[A-Za-z0-9_-]{32}$/);
    assert.equal(idp.tokenRequests.length, 1, "the code was exchanged once, with its verifier");

    // Back where the sign-in started, with nothing but the route in the address.
    assert.equal(page.url(), `${baseUrl}/dashboard#/projects`);
    const leftovers = await page.evaluate(() =>
      Object.keys(sessionStorage).filter((k) => k.startsWith("gss.oidc.")),
    );
    assert.deepEqual(leftovers, []);
    const code = idp.codes[0]!;
    assert.ok(
      t.logs.some((l) => l.includes('"url":"/dashboard"')),
      "the callback request was logged, without its query",
    );
    assert.equal(t.logs.filter((l) => l.includes(code)).length, 0, "the code reached a log line");

    // The token works on the API (the provider's JWT verified against its JWKS).
    const token = (await page.evaluate(() => sessionStorage.getItem("gss.token"))) as string;
    t.secrets.add(token);
    const orgs = await fetch(`${baseUrl}/orgs`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(orgs.status, 200);
  });

  test("a forged answer (a state this tab never sent) is refused and removed from the address", async () => {
    await page.evaluate(() => sessionStorage.clear());
    await page.goto(`${baseUrl}/dashboard?code=forged-code&state=forged-state#/orgs`);
    await page.getByRole("heading", { level: 1, name: "Sign in" }).waitFor();
    const alert = page.locator('[role="alert"]:not([hidden])').first();
    assert.match((await alert.textContent()) ?? "", /does not match a sign-in started in this tab/);
    assert.equal(new URL(page.url()).search, "");
    assert.equal(idp.tokenRequests.length, 1, "a forged code is never exchanged");
  });

  test("has no development sign-in, and a strict Content-Security-Policy naming the provider", async () => {
    const res = await t.request({ method: "POST", url: "/auth/dev-token", payload: { email: EMAIL } });
    assert.equal(res.statusCode, 404);
    const html = await fetch(`${baseUrl}/dashboard`);
    const csp = html.headers.get("content-security-policy") ?? "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.ok(csp.includes(`connect-src 'self' ${idp.issuer}`), csp);
    const etag = html.headers.get("etag")!;
    const again = await fetch(`${baseUrl}/dashboard`, { headers: { "if-none-match": etag } });
    assert.equal(again.status, 304);
    const traversal = await fetch(`${baseUrl}/dashboard/..%2F..%2Fpackage.json`);
    assert.equal(traversal.status, 404);
  });

  test("no console error and no page error", () => {
    assert.deepEqual(b.errors, []);
  });
});

describe("the dashboard's money formatting", () => {
  test("formats any wei amount exactly as viem does, and parses it back", async () => {
    // Plain browser JavaScript (no types): imported by URL so the type checker leaves it alone.
    const money = await import(new URL("../src/dashboard/public/money.js", import.meta.url).href);
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 40n }),
        fc.integer({ min: 0, max: 30 }),
        (wei, decimals) => {
          const text: string = money.formatUnits(wei.toString(), decimals);
          assert.equal(text.replaceAll(",", ""), viemFormatUnits(wei, decimals));
          // Typed back without the grouping commas: a comma in typed text is never a thousands
          // separator (issue 24: "1,5" became 15), so the grouped form is refused, not multiplied.
          assert.equal(money.parseUnits(text.replaceAll(",", ""), decimals), wei.toString());
          if (text.includes(",")) assert.equal(money.parseUnits(text, decimals), null);
        },
      ),
    );
    assert.equal(money.formatUnits("1234567000000000000000", 18), "1,234.567");
    assert.equal(money.parseUnits("0.0000000000000000001", 18), null, "more decimals than the token has");
    assert.equal(money.parseUnits("1e18", 18), null);
  });
});
