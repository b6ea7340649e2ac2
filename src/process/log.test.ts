import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import Fastify from "fastify";
import { pino } from "pino";
import { CENSORED, LOG_BLOCK_BYTES, loggedHeaders, loggedRequest, logOptions, processLogger } from "./log.ts";

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

describe("the process logger's stdout writes", () => {
  // A child process with the default destination (stdout in blocks): what it logs, read by us.
  const child = (script: string) =>
    spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["pipe", "pipe", "inherit"],
    });
  const preamble = `import { exitAfterLog, processLogger } from "./src/process/log.ts"; const log = processLogger("info");`;
  /** Runs `script` to its end: its exit code and the lines it wrote, in the order they came out. */
  const linesOf = async (script: string) => {
    const proc = child(script);
    let text = "";
    proc.stdout!.on("data", (chunk) => {
      text += String(chunk);
    });
    // "close": the process has exited and its stdout has ended.
    const [code] = await once(proc, "close");
    return { code, got: lines(text) };
  };

  it("an idle process's line still reaches stdout while the process runs (the periodic flush)", {
    timeout: 20_000,
  }, async (t) => {
    // One short line, far below LOG_BLOCK_BYTES; the child stays up until we close its stdin.
    const proc = child(`${preamble} log.info({ n: 1 }, "lonely line"); process.stdin.resume();`);
    t.after(() => proc.kill());
    let text = "";
    await new Promise<void>((resolve, reject) => {
      proc.stdout!.on("data", (chunk) => {
        text += String(chunk);
        if (text.includes("\n")) resolve();
      });
      proc.on("exit", (code) => reject(new Error(`the child exited (${code}) before its line came out`)));
    });
    assert.equal(proc.exitCode, null, "the line came out while the process was still running");
    proc.stdin!.end();
    await once(proc, "exit");
    assert.equal(lines(text)[0]!.msg, "lonely line");
  });

  it("lines logged right before exitAfterLog, and more than a block of them, all come out in order", async () => {
    // Blocks go out by asynchronous writes; pino's synchronous flush at a bare process.exit wrote
    // the buffered lines while an earlier block was still being written, which came out after
    // them (CI, 2026-11-30: lines 101.. first, then 0..100). exitAfterLog waits for the writes.
    const count = Math.ceil((3 * LOG_BLOCK_BYTES) / 60);
    const { code, got } = await linesOf(
      `${preamble} for (let i = 0; i < ${count}; i++) log.info({ i }, "line"); log.error("last words"); exitAfterLog(log, 3); exitAfterLog(log, 0);`,
    );
    // The first exit's code.
    assert.equal(code, 3);
    assert.deepEqual(
      got.map((l) => l.i ?? l.msg),
      [...Array.from({ length: count }, (_, i) => i), "last words"],
    );
  });

  it("lines logged right before a bare process.exit, fewer than a block, all come out in order", async () => {
    // Nothing is being written yet: pino's flush at exit writes the buffer, whole and in order.
    const count = Math.floor(LOG_BLOCK_BYTES / 200);
    const { code, got } = await linesOf(
      `${preamble} for (let i = 0; i < ${count}; i++) log.info({ i }, "line"); log.error("last words"); process.exit(4);`,
    );
    assert.equal(code, 4);
    assert.deepEqual(
      got.map((l) => l.i ?? l.msg),
      [...Array.from({ length: count }, (_, i) => i), "last words"],
    );
  });
});
