/**
 * The operator CLI as a child process: the compiled entry point (`node dist/operator/main.js`,
 * what `npm run paymaster -- <args>` runs after bringing the build up to date), its exit status
 * and both streams. The environment is only what the caller gives (and PATH), so a test states
 * every setting the command reads.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { CHILD_NODE_FLAGS, ensureBuilt, REPO_ROOT } from "./server-process.ts";

const ENTRY = join(REPO_ROOT, "dist", "operator", "main.js");

export interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
  /** The last line of stdout. */
  last: string;
}

let built = false;

export async function runPaymasterCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  if (!built) {
    ensureBuilt();
    built = true;
  }
  let result: Omit<CliRun, "last">;
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [...CHILD_NODE_FLAGS, ENTRY, ...args],
      {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH ?? "", ...env },
      },
    );
    result = { status: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    result = { status: e.code, stdout: e.stdout, stderr: e.stderr };
  }
  const lines = result.stdout.trim().split("\n");
  return { ...result, last: lines[lines.length - 1] ?? "" };
}
