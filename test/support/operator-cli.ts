/**
 * `npm run paymaster -- <args>` as a child process (node + tsx, scripts/paymaster.ts): the real
 * entry point, its exit status and both streams. The environment is only what the caller gives
 * (and PATH), so a test states every setting the command reads.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

const ROOT = new URL("../../", import.meta.url).pathname;
const SCRIPT = join(ROOT, "scripts", "paymaster.ts");

export interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
  /** The last line of stdout. */
  last: string;
}

export async function runPaymasterCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  let result: Omit<CliRun, "last">;
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", SCRIPT, ...args],
      {
        cwd: ROOT,
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
