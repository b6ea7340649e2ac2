import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import Fastify from "fastify";
import { pino } from "pino";
import { CENSORED, loggedHeaders, loggedRequest, logOptions, processLogger } from "./log.ts";

const TOKEN = "Bearer eyJhbGciOiJFUzI1NiJ9.secret-token";

/** A process logger writing into `text` (one JSON line per call). */
function capture() {
  const out = { text: "" };
  const stream = new Writable({
    write(chunk, _enc, done) {
      out.text += String(chunk);
      done();
    },
  });
  return { out, stream };
}

const lines = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("the process logger keeps credentials out of its lines", () => {
  it("censors an Authorization header in any letter case and leaves the logged object as it was", async () => {
    const { out, stream } = capture();
    const log = processLogger("info", { worker: 1 }, stream);
    const headers = { Authorization: TOKEN, "content-type": "application/json" };
    log.info({ headers }, "outbound");
    log.info({ headers: { authorization: TOKEN } }, "inbound");
    const [outbound, inbound] = lines(out.text);
    assert.deepEqual(outbound!.headers, { Authorization: CENSORED, "content-type": "application/json" });
    assert.deepEqual(inbound!.headers, { authorization: CENSORED });
    assert.equal(outbound!.worker, 1);
    assert.equal(headers.Authorization, TOKEN, "the caller's object is not changed");
    assert.ok(!out.text.includes("secret-token"));
  });

  it("logs a bare request as its summary, never its headers", () => {
    const raw = {
      method: "POST",
      url: "/sponsor/authorize",
      headers: { host: "api.example", authorization: TOKEN, "accept-version": "2" },
      socket: { remoteAddress: "10.0.0.7", remotePort: 51234 },
    };
    assert.deepEqual(loggedRequest(raw), {
      method: "POST",
      url: "/sponsor/authorize",
      version: "2",
      host: "api.example",
      remoteAddress: "10.0.0.7",
      remotePort: 51234,
    });
    assert.equal(loggedRequest(null), null);
    assert.equal(loggedHeaders("not headers"), "not headers");
  });

  it("a Fastify request's line has the fields Fastify's own lines have, and no token", async () => {
    const { out, stream } = capture();
    const app = Fastify({ loggerInstance: pino(logOptions("info"), stream) });
    app.get("/ping", async (request) => {
      request.log.info({ req: request, headers: request.headers }, "seen");
      return { ok: true };
    });
    const res = await app.inject({
      method: "GET",
      url: "/ping?x=1",
      headers: { authorization: TOKEN, host: "h.example" },
    });
    assert.equal(res.statusCode, 200);
    await app.close();
    const seen = lines(out.text).find((l) => l.msg === "seen")!;
    const req = seen.req as Record<string, unknown>;
    assert.deepEqual(
      { method: req.method, url: req.url, host: req.host, remoteAddress: req.remoteAddress },
      { method: "GET", url: "/ping?x=1", host: "h.example", remoteAddress: "127.0.0.1" },
    );
    assert.ok(!("headers" in req));
    assert.equal((seen.headers as Record<string, unknown>).authorization, CENSORED);
    assert.ok(!out.text.includes("secret-token"), out.text);
  });
});
