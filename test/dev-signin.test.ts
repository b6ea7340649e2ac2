/**
 * The development sign-in under DASHBOARD_DEV_SIGNIN=loopback: it answers a client on this machine
 * that reached the service directly, and nothing that came through a proxy, whatever TRUST_PROXY
 * says. A reverse proxy on the same host makes every client's TCP peer a loopback address.
 */
import assert from "node:assert/strict";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { startTestApp, type TestApp } from "./support/app.ts";

const EMAIL = "owner@devsignin.example";

function signIn(t: TestApp, remoteAddress: string, headers: Record<string, string> = {}) {
  return t.request({
    method: "POST",
    url: "/auth/dev-token",
    payload: { email: EMAIL },
    remoteAddress,
    headers,
  });
}

describe("development sign-in, loopback mode", () => {
  const apps: Record<string, TestApp> = {};
  before(async () => {
    apps.plain = await startTestApp({ env: { DASHBOARD_DEV_SIGNIN: "loopback" } });
    apps.trusting = await startTestApp({ env: { DASHBOARD_DEV_SIGNIN: "loopback", TRUST_PROXY: "1" } });
  });
  after(async () => {
    for (const t of Object.values(apps)) await t.close();
  });

  it("a direct loopback client gets a token; a remote one is refused", async () => {
    for (const t of Object.values(apps)) {
      for (const local of ["127.0.0.1", "::1", "::ffff:127.0.0.1"]) {
        assert.equal((await signIn(t, local)).statusCode, 201, local);
      }
      const remote = await signIn(t, "203.0.113.9");
      assert.equal(remote.statusCode, 403);
      assert.equal(remote.json().code, "forbidden");
    }
  });

  it("any proxy header refuses a loopback peer, with or without TRUST_PROXY", async () => {
    const forms: Record<string, string>[] = [
      { "x-forwarded-for": "127.0.0.1" },
      { "x-forwarded-for": "203.0.113.9" },
      { forwarded: "for=127.0.0.1" },
      { "x-real-ip": "127.0.0.1" },
      { "x-forwarded-host": "localhost" },
      { via: "1.1 nginx" },
    ];
    for (const [name, t] of Object.entries(apps)) {
      for (const headers of forms) {
        const res = await signIn(t, "127.0.0.1", headers);
        assert.equal(res.statusCode, 403, `${name} ${JSON.stringify(headers)}`);
        assert.equal(res.json().code, "forbidden");
        assert.ok(!("token" in res.json()));
      }
    }
  });

  it("TRUST_PROXY=1 with X-Forwarded-For: 127.0.0.1 from a remote peer gets no token", async () => {
    const res = await signIn(apps.trusting!, "203.0.113.9", { "x-forwarded-for": "127.0.0.1" });
    assert.equal(res.statusCode, 403);
  });

  it("through a real reverse proxy on this host: refused; the same service directly: a token", async () => {
    const t = apps.plain!;
    const upstream = await t.app.listen({ port: 0, host: "127.0.0.1" });
    const target = new URL(upstream);
    // A minimal reverse proxy as nginx would be set up: it forwards and adds X-Forwarded-For.
    const proxy: Server = createServer((req, res) => {
      const out = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, "x-forwarded-for": req.socket.remoteAddress ?? "" },
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(out);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    try {
      const post = (base: string) =>
        fetch(`${base}/auth/dev-token`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ email: EMAIL }),
        });
      const viaProxy = await post(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
      assert.equal(viaProxy.status, 403);
      assert.equal(((await viaProxy.json()) as { code: string }).code, "forbidden");
      const direct = await post(upstream);
      assert.equal(direct.status, 201);
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
