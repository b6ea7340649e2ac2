import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { LOCAL_AUDIENCE, LOCAL_ISSUER } from "../src/identity/tokens.ts";
import { startTestApp, type TestApp } from "./support/app.ts";

let t: TestApp;
before(async () => {
  t = await startTestApp();
});
after(() => t.close());

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
const nowSec = () => Math.floor(Date.now() / 1000);

async function status(token: string) {
  const res = await t.request({ method: "GET", url: "/orgs", token });
  if (res.statusCode === 401) assert.equal(res.json().code, "unauthorized");
  return res.statusCode;
}

describe("developer tokens (local issuer)", () => {
  it("accepts a token from `npm run token`'s issuer", async () => {
    assert.equal(await status(await t.token("ok@example.com")), 200);
  });

  it("refuses forged tokens: alg none, wrong issuer or audience, expired, missing exp, another key", async () => {
    const claims = {
      iss: LOCAL_ISSUER,
      aud: LOCAL_AUDIENCE,
      sub: "local:eve@example.com",
      email: "eve@example.com",
    };
    const none = `${b64({ alg: "none", typ: "JWT" })}.${b64({ ...claims, exp: nowSec() + 600 })}.`;
    const other = await generateKeyPair("ES256");
    const sign = (payload: Record<string, unknown>) =>
      new SignJWT(payload).setProtectedHeader({ alg: "ES256" }).sign(other.privateKey);

    const forged = [
      none,
      await sign({ ...claims, exp: nowSec() + 600 }),
      "not.a.jwt",
      "eyJhbGciOiJFUzI1NiJ9.e30.c2ln",
    ];
    for (const token of forged) assert.equal(await status(token), 401, token.slice(0, 30));
  });

  it("refuses tokens whose issuer, audience, expiry or exp claim is wrong (signed by the right key)", async () => {
    const cases: Record<string, unknown>[] = [
      { iss: "https://evil.example", aud: LOCAL_AUDIENCE, exp: nowSec() + 600 },
      { iss: LOCAL_ISSUER, aud: "another-api", exp: nowSec() + 600 },
      { iss: LOCAL_ISSUER, aud: LOCAL_AUDIENCE, exp: nowSec() - 3600 },
      { iss: LOCAL_ISSUER, aud: LOCAL_AUDIENCE },
    ];
    for (const c of cases) {
      const token = await t.issuer.signForTest({ sub: "local:x@example.com", email: "x@example.com", ...c });
      assert.equal(await status(token), 401, JSON.stringify(c));
    }
  });
});

describe("developer tokens (OIDC)", () => {
  let jwks: Server;
  let url: string;
  let keys: Awaited<ReturnType<typeof generateKeyPair>>;
  let fetches = 0;
  before(async () => {
    keys = await generateKeyPair("RS256");
    const jwk = { ...(await exportJWK(keys.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
    jwks = createServer((_req, res) => {
      fetches++;
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => jwks.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`;
  });
  after(() => new Promise<void>((r) => jwks.close(() => r())));

  it("verifies issuer, audience, pinned algorithms and exp against the provider's JWKS, caching it", async () => {
    const oidc = await startTestApp({
      env: { OIDC_ISSUER: "https://id.example", OIDC_AUDIENCE: "gss", OIDC_JWKS_URL: url },
    });
    try {
      const good = (extra: Record<string, unknown> = {}) =>
        new SignJWT({ email: "oidc@example.com", ...extra })
          .setProtectedHeader({ alg: "RS256", kid: "k1" })
          .setIssuer("https://id.example")
          .setAudience("gss")
          .setSubject("user-1")
          .setExpirationTime("5m")
          .sign(keys.privateKey);
      const ok = await oidc.request({ method: "GET", url: "/orgs", token: await good() });
      assert.equal(ok.statusCode, 200);
      const again = await oidc.request({ method: "GET", url: "/orgs", token: await good() });
      assert.equal(again.statusCode, 200);
      assert.equal(fetches, 1, "the JWKS is cached");
      const hs = await new SignJWT({ email: "oidc@example.com" })
        .setProtectedHeader({ alg: "HS256" })
        .setIssuer("https://id.example")
        .setAudience("gss")
        .setSubject("user-1")
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode("x".repeat(32)));
      assert.equal((await oidc.request({ method: "GET", url: "/orgs", token: hs })).statusCode, 401);
      const unverified = await good({ email_verified: false });
      assert.equal((await oidc.request({ method: "GET", url: "/orgs", token: unverified })).statusCode, 401);
      const unknownKid = await new SignJWT({ email: "oidc@example.com" })
        .setProtectedHeader({ alg: "RS256", kid: "k2" })
        .setIssuer("https://id.example")
        .setAudience("gss")
        .setSubject("user-1")
        .setExpirationTime("5m")
        .sign(keys.privateKey);
      assert.equal((await oidc.request({ method: "GET", url: "/orgs", token: unknownKid })).statusCode, 401);
      assert.equal((await oidc.request({ method: "GET", url: "/orgs", token: unknownKid })).statusCode, 401);
      // The JWKS was fetched moments ago: within the 30 s cooldown unknown kids trigger no refetch storm.
      assert.equal(fetches, 1, "an unknown kid refetches the JWKS at most once per 30 s");
    } finally {
      await oidc.close();
    }
  });
});

describe("invitations", () => {
  it("a member added by email before signing in is linked when their first token arrives", async () => {
    const owner = await t.token("boss@example.com");
    const org = await t.request({
      method: "POST",
      url: "/orgs",
      token: owner,
      payload: { name: "Inv", slug: "inv-org" },
    });
    assert.equal(org.statusCode, 201);
    const add = await t.request({
      method: "POST",
      url: "/orgs/inv-org/members",
      token: owner,
      payload: { email: "Newbie@Example.com", role: "developer" },
    });
    assert.equal(add.statusCode, 201);
    assert.equal(add.json().email, "newbie@example.com");
    const newbie = await t.token("newbie@example.com");
    const orgs = await t.request({ method: "GET", url: "/orgs", token: newbie });
    assert.deepEqual(
      orgs.json().map((o: { slug: string; role: string }) => [o.slug, o.role]),
      [["inv-org", "developer"]],
    );
    assert.equal(orgs.json()[0].id, org.json().id);
  });
});
