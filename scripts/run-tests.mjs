// Finds the test files (node 20's runner takes no globs) and runs them with node's test runner.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : find(path);
    return e.name.endsWith(".test.ts") ? [path] : [];
  });
}

const only = process.argv.slice(2);
const files = only.length > 0 ? only : [...find("src"), ...find("test")].sort();
// --expose-gc: test/webhooks-fairness.test.ts collects garbage mid-request to prove a delivery's
// deadline survives it. The runner passes these flags on to each test file's process.
// TEST_CONCURRENCY: test files run at once (default 1).
const concurrency = Number(process.env.TEST_CONCURRENCY ?? 1);
const result = spawnSync(
  process.execPath,
  [
    "--expose-gc",
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${concurrency}`,
    "--test-reporter=spec",
    ...files,
  ],
  { stdio: "inherit" },
);
process.exit(result.status ?? 1);
