/**
 * A redis-server of a test's own, as a child process on a free port (Debian's binary), for the
 * fault tests: it can be stopped and started again on the same port. The shared server on 6379
 * is never touched.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { canConnect, freePort } from "./ports.ts";

export interface RedisServer {
  url: string;
  /** Starts it again on its port after stop(). */
  start(): Promise<void>;
  /** Kills it (SIGKILL: as a crash would) and waits for it to exit. */
  stop(): Promise<void>;
}

export async function startRedisServer(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const killOnExit = () => child?.kill("SIGKILL");
  process.on("exit", killOnExit);
  const server: RedisServer = {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
      const c = spawn("redis-server", [...args, "--daemonize", "no"], { stdio: "ignore" });
      child = c;
      const failed = new Promise<boolean>((resolve) => c.once("error", () => resolve(false)));
      const end = Date.now() + 10_000;
      while (!(await Promise.race([canConnect(port), failed]))) {
        assert.ok(Date.now() < end && c.exitCode === null, "redis-server did not listen within 10 s");
        await sleep(50);
      }
    },
    async stop() {
      const c = child;
      child = null;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((resolve) => c.once("exit", resolve));
      c.kill("SIGKILL");
      await exited;
    },
  };
  await server.start();
  return server;
}
