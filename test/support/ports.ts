/**
 * Local TCP ports for the servers tests start: a free one, and whether one is listening.
 *
 * Test files run side by side (scripts/run-tests.mjs), each starting anvil, PostgreSQL, Redis,
 * Alto or the service on ports of its own. Asking the kernel for a port (listen on 0, close,
 * hand the number on) leaves a gap before the server binds it, in which another file's probe may
 * be handed the same number, or an outgoing connection may take it as its local port. So ports
 * come from below the kernel's ephemeral range (never a client socket's, never a kernel pick), and
 * each one handed out is claimed in a file named after it (created exclusively, holding the
 * claimer's pid) for as long as the claiming process lives.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processAlive } from "../../src/db/data-dir-lock.ts";

/** Below Linux's default ephemeral range (32768–60999), above the well-known services'. */
const FIRST_PORT = 20_000;
const LAST_PORT = 32_000;
const CLAIMS = join(tmpdir(), "gss-test-ports");
const claimed = new Set<number>();

process.once("exit", () => {
  for (const port of claimed) rmSync(claimFile(port), { force: true });
});

/** A TCP port free on 127.0.0.1 that no other process running tests has been handed. */
export async function freePort(): Promise<number> {
  mkdirSync(CLAIMS, { recursive: true });
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = FIRST_PORT + Math.floor(Math.random() * (LAST_PORT - FIRST_PORT));
    if (claimed.has(port) || !claim(port)) continue;
    if (await canBind(port)) return port;
    release(port);
  }
  throw new Error(`no free port in ${FIRST_PORT}–${LAST_PORT} after 200 attempts`);
}

function claimFile(port: number): string {
  return join(CLAIMS, String(port));
}

/** Claims the port for this process; a claim whose process has exited is taken over. */
function claim(port: number): boolean {
  const file = claimFile(port);
  try {
    writeFileSync(file, String(process.pid), { flag: "wx" });
  } catch {
    const owner = Number(readFileSafe(file));
    if (Number.isInteger(owner) && owner > 0 && processAlive(owner)) return false;
    rmSync(file, { force: true });
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
    } catch {
      return false; // another process took it over first
    }
  }
  claimed.add(port);
  return true;
}

function release(port: number): void {
  claimed.delete(port);
  rmSync(claimFile(port), { force: true });
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** Whether something accepts connections on 127.0.0.1:port. */
export function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.connect(port, "127.0.0.1");
  });
}
