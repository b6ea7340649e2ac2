/**
 * The compiled server (dist/server.js) as a child process, the way production runs it: for the
 * tests of what only a real process shows (signals, exit codes, start-up failures, the data
 * directory lock, cluster mode). The build is brought up to date once per test file.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { localIssuer } from "../../src/identity/tokens.ts";
import { freePort } from "./ports.ts";

export { freePort };

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SERVER_JS = join(REPO_ROOT, "dist", "server.js");

/**
 * Node flags for the processes the tests start from the build (the server, the operator CLI). A
 * process on the embedded store runs PGlite, whose WebAssembly V8 first compiles quickly
 * (Liftoff) and then again, optimised, for the functions it finds hot (TurboFan, on background
 * threads). A server that lives for a test does not gain that second compile back: a restart on an
 * existing data directory cost 7.0 s of CPU until ready, 4.9 s with `--liftoff-only` (four
 * alternated starts each, 2026-11-30, on a slow day of this 2-core machine). The flag changes how
 * V8 compiles the code, not what it does; production starts without it. The test processes
 * themselves run with it too (scripts/run-tests.mjs).
 */
export const CHILD_NODE_FLAGS = ["--liftoff-only"];

/** Builds dist/ when src/ changed since the last build (what `npm start` does first). */
export function ensureBuilt(): void {
  const result = spawnSync(process.execPath, [join(REPO_ROOT, "scripts", "build.mjs"), "--if-stale"], {
    cwd: REPO_ROOT,
    encoding: "utf8",
  });
  assert.ok(result.status === 0, `the build failed:\n${result.stdout}\n${result.stderr}`);
}

/** One parsed stdout line of the server (pino JSON), or `{raw}` for anything else. */
export type LogLine = Record<string, unknown> & { level?: number; msg?: string; raw?: string };

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly port: number;
  readonly baseUrl: string;
  /** Every stdout line so far, parsed. */
  readonly lines: LogLine[];
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Resolves with the first line (past or future) that matches. */
  waitForLine(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** The processes (pids) with a "request completed" line so far, for `route` if given. */
  servedBy(route?: string): Set<unknown>;
  /**
   * servedBy(route) once it holds at least `count` processes (polled every 20 ms; default 5 s).
   * The service writes its log in blocks, up to LOG_FLUSH_MS (100 ms) after a line: a test that
   * counts the workers that served waits here rather than reading the lines at once.
   */
  waitForServers(count: number, route?: string, timeoutMs?: number): Promise<Set<unknown>>;
  /** Resolves once the server answers GET /health with 200. */
  waitReady(timeoutMs?: number): Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal?: NodeJS.Signals): void;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/**
 * Starts `node dist/server.js` with a development environment that reaches nothing outside this
 * machine (the chain RPC is a closed local port unless `env` names one), plus `env`.
 */
export async function startServer(env: Record<string, string | undefined> = {}): Promise<ServerProcess> {
  const port = env.PORT ? Number(env.PORT) : await freePort();
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // The test run's own store settings reach the child only when the test passes them.
    if (v !== undefined && k !== "DATABASE_URL" && k !== "REDIS_URL" && !k.startsWith("NODE_TEST"))
      base[k] = v;
  }
  const childEnv: Record<string, string> = {
    ...base,
    NODE_ENV: "development",
    LOG_LEVEL: "info",
    HOST: "127.0.0.1",
    PORT: String(port),
    CHAIN_14601_RPC_URL: "http://127.0.0.1:9",
  };
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  const child = spawn(process.execPath, [...CHILD_NODE_FLAGS, SERVER_JS], {
    cwd: REPO_ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  const lines: LogLine[] = [];
  const waiters: { match: (l: LogLine) => boolean; resolve: (l: LogLine) => void }[] = [];
  let partial = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop()!;
    for (const text of parts) {
      if (text.trim() === "") continue;
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        line = { raw: text };
      }
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  // Streams drain after 'exit'; wait for 'close' so that every line has been read.
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const exitedAndRead = exited.then(async (r) => {
    await closed;
    return r;
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const describe = () =>
    `stdout:\n${lines.map((l) => l.raw ?? JSON.stringify(l)).join("\n")}\nstderr:\n${stderr}`;

  const server: ServerProcess = {
    child,
    pid: child.pid!,
    port,
    baseUrl,
    lines,
    stderr: () => stderr,
    waitForLine(match, timeoutMs = 30_000) {
      const found = lines.find(match);
      if (found) return Promise.resolve(found);
      return new Promise<LogLine>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching log line in ${timeoutMs} ms\n${describe()}`)),
          timeoutMs,
        );
        waiters.push({
          match,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
      });
    },
    servedBy(route) {
      return new Set(
        lines
          .filter((l) => l.msg === "request completed" && (route === undefined || l.route === route))
          .map((l) => l.pid),
      );
    },
    async waitForServers(count, route, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      for (let served = server.servedBy(route); ; served = server.servedBy(route)) {
        if (served.size >= count) return served;
        if (Date.now() > deadline) {
          throw new Error(
            `${served.size} of ${count} processes logged a completed request${route ? ` to ${route}` : ""} in ${timeoutMs} ms\n${describe()}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    async waitReady(timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      let ended = false;
      void exited.then(() => {
        ended = true;
      });
      while (Date.now() < deadline) {
        if (ended) throw new Error(`the server exited during start-up\n${describe()}`);
        try {
          const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(1000) });
          await res.arrayBuffer();
          if (res.ok) return;
        } catch {
          // Not listening yet.
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`the server was not ready within ${timeoutMs} ms\n${describe()}`);
    },
    exited: exitedAndRead,
    kill(signal = "SIGTERM") {
      child.kill(signal);
    },
    async stop(graceMs = 20_000) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const result = await exitedAndRead;
      clearTimeout(timer);
      return result;
    },
  };
  return server;
}

/**
 * Runs the server to its exit (a start-up failure) and returns what it said. A server still running
 * after `timeoutMs` is killed and reported as `timedOut`: a start-up failure takes seconds alone,
 * but in CI ten of them start at once beside three test processes on two cores (one took over the
 * former 60 s bound there on Node 24, and its SIGKILL read as a wrong exit code).
 */
export async function runToExit(env: Record<string, string | undefined>, timeoutMs = 180_000) {
  const server = await startServer(env);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    server.kill("SIGKILL");
  }, timeoutMs);
  const { code, signal } = await server.exited;
  clearTimeout(timer);
  return { code, signal, timedOut, lines: server.lines, stderr: server.stderr(), pid: server.pid };
}

/** A stack trace line, as Node prints them. */
export const STACK_LINE = /^\s+at .+(\(|:\d+)/m;

/**
 * A caller of a server process's API as a developer signed in with the local token issuer of its
 * DATA_DIR: JSON in, JSON out, and any answer but a 2xx fails the test with its body.
 */
export async function apiCaller(server: ServerProcess, dataDir: string, email: string) {
  const token = await (await localIssuer(dataDir)).issue(email);
  return async (path: string, body: unknown, method = "POST"): Promise<Record<string, unknown>> => {
    const res = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    assert.ok(res.ok, `${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}
