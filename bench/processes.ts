import { type ChildProcess, spawn } from "node:child_process";
import { openSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { freePort } from "../test/support/ports.ts";

/**
 * Child processes the bench starts: the service itself (compiled, `node dist/server.js`, as
 * production runs it; in cluster mode a primary and its workers) and the floor app (TypeScript,
 * with the tsx loader in the same process). Signals reach each directly, and
 * `BENCH_NODE_OPTIONS` (e.g. `--cpu-prof`) applies to them alone. CPU time and RSS are summed
 * over a child and its descendants (the cluster's workers). Every child is tracked and stopped
 * when the bench exits, however it exits.
 */

export const REPO_ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * CPU per request of the rest of the machine (neither the target, the load generator, the stores
 * nor the receiver) above which a run counts as disturbed. Quiet floors here showed -10 to 25 µs;
 * on 2026-11-30 floors with 48-448 µs gave ratios of 0.67-0.86 where quiet ones gave 0.44-0.68 for
 * the same code.
 */
export const DISTURBED_OTHER_US = 25;

export interface Child {
  readonly name: string;
  readonly pid: number;
  readonly baseUrl: string;
  readonly logPath: string;
  /** CPU time (user + system) the process and its descendants have used so far, in milliseconds. */
  cpuMs(): number;
  /** Resident memory of the process and its descendants now, in KiB; NaN off Linux. */
  rssKb(): number;
  /** Null while the process runs; how it ended otherwise. */
  exited(): string | null;
  /** The last lines of its log. */
  logTail(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();

/** Kills whatever is still running; installed once for exits and interrupts. */
function killAll() {
  for (const child of running) child.kill("SIGKILL");
  running.clear();
}
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

export interface StartOptions {
  name: string;
  entry: string;
  env: Record<string, string>;
  logPath: string;
  /** Path answering 200 once the process is ready. */
  readyPath: string;
  /** A line the log must also contain before the process counts as ready (cluster: every worker listens). */
  readyLogLine?: string;
  /** Run a TypeScript entry with the tsx loader (the default), or a compiled one with plain node. */
  loader?: "tsx" | "none";
  readyTimeoutMs?: number;
}

export async function startChild(opts: StartOptions): Promise<Child> {
  const port = await freePort();
  const log = openSync(opts.logPath, "a");
  const nodeArgs = (process.env.BENCH_NODE_OPTIONS ?? "").split(" ").filter(Boolean);
  const loaderArgs = (opts.loader ?? "tsx") === "tsx" ? ["--import", "tsx"] : [];
  const child = spawn(process.execPath, [...nodeArgs, ...loaderArgs, opts.entry], {
    cwd: REPO_ROOT,
    env: { ...opts.env, PORT: String(port), HOST: "127.0.0.1" },
    stdio: ["ignore", log, log],
  });
  running.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", () => running.delete(child));
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitReady(
    opts.name,
    child,
    `${baseUrl}${opts.readyPath}`,
    opts.logPath,
    opts.readyTimeoutMs ?? 120_000,
    opts.readyLogLine,
  );
  const pid = child.pid!;
  return {
    name: opts.name,
    pid,
    baseUrl,
    logPath: opts.logPath,
    cpuMs: () => treeOf(pid).reduce((sum, p) => sum + processCpuMs(p), 0),
    rssKb: () => treeOf(pid).reduce((sum, p) => sum + processRssKb(p), 0),
    exited: () =>
      child.exitCode !== null
        ? `exit code ${child.exitCode}`
        : child.signalCode !== null
          ? `signal ${child.signalCode}`
          : null,
    logTail: () => tail(opts.logPath),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function waitReady(
  name: string,
  child: ChildProcess,
  url: string,
  logPath: string,
  timeoutMs: number,
  logLine?: string,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited during start-up; its log (${logPath}):\n${tail(logPath)}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok && (!logLine || readFileSync(logPath, "utf8").includes(logLine))) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`${name} was not ready within ${timeoutMs} ms; its log (${logPath}):\n${tail(logPath)}`);
}

function tail(path: string, lines = 30): string {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** utime + stime of a process from /proc, in ms (Linux); NaN where /proc is unavailable. */
export function processCpuMs(pid: number): number {
  return readStat(pid)?.cpuMs ?? Number.NaN;
}

/** VmRSS of a process from /proc, in KiB (Linux); NaN where /proc is unavailable. */
export function processRssKb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/** A process and its descendants (Linux, /proc/<pid>/task/<tid>/children); just the pid elsewhere. */
export function treeOf(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const task of readdirSync(`/proc/${out[i]}/task`)) {
        const children = readFileSync(`/proc/${out[i]}/task/${task}/children`, "utf8").trim();
        if (children) out.push(...children.split(" ").map(Number));
      }
    } catch {
      // Gone meanwhile, or no /proc.
    }
  }
  return out;
}

function readStat(pid: number | string): { command: string; cpuMs: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const command = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { command, cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicksPerSec };
  } catch {
    return null;
  }
}

const STORE_COMMANDS = /^(postgres|redis-server)$/;

/**
 * CPU time so far of every local PostgreSQL and Redis process, by pid. Sampled before and after
 * a scenario it gives the stores' share per request (a backend that started meanwhile counts in
 * full; one that ended meanwhile is lost, which a connection pool makes rare).
 */
export function storeCpuSnapshot(): Map<string, number> {
  const out = new Map<string, number>();
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return out;
  }
  for (const pid of pids) {
    const stat = readStat(pid);
    if (stat && STORE_COMMANDS.test(stat.command)) out.set(pid, stat.cpuMs);
  }
  return out;
}

export function storeCpuSince(before: Map<string, number>): number {
  let ms = 0;
  for (const [pid, cpuMs] of storeCpuSnapshot()) ms += cpuMs - (before.get(pid) ?? 0);
  return ms;
}

// USER_HZ is 100 on every mainstream Linux build; /proc exposes no portable way to read it.
const clockTicksPerSec = 100;

/** Busy and total CPU time of the whole machine (all cores), in ms, from /proc/stat. */
export function machineCpu(): { busyMs: number; totalMs: number } {
  try {
    const first = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    const v = first.trim().split(/\s+/).slice(1).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    const total = v.reduce((a, b) => a + b, 0);
    const ms = 1000 / clockTicksPerSec;
    return { busyMs: (total - idle) * ms, totalMs: total * ms };
  } catch {
    return { busyMs: Number.NaN, totalMs: Number.NaN };
  }
}
