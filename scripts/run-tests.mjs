// Runs the test suite with node's test runner: every test file (or the files named on the command
// line) compiled first, then run one process per file.
//
// Why compile first: loading the service's TypeScript through tsx's loader cost each test process
// about 3.5 s of CPU before its first test (measured on the 2-core CI machine: importing
// test/support/app.ts took 3.3–3.7 s of CPU through tsx, 1.1–1.4 s as one esbuild bundle), and
// the suite runs about a hundred processes per store. esbuild (the compiler tsx itself uses)
// bundles each test file with the sources it imports into .test-build/, packages left external,
// in about a second for all of them.
//
// Every module keeps the location of its source: `import.meta.url` and `import.meta.dirname` are
// replaced, file by file, with the source file's own, so paths built from them (the migrations,
// contract artifacts, dist/server.js, fixtures) resolve as they do uncompiled. Stack traces map
// back to the TypeScript through the bundles' source maps.
//
//   node scripts/run-tests.mjs [files…]
//   TEST_CONCURRENCY=n   test files run at once (default 2)
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const OUT = join(ROOT, ".test-build");

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : find(path);
    return e.name.endsWith(".test.ts") ? [path] : [];
  });
}

/** Replaces each module's `import.meta` location with its source file's (see the top). */
const sourceLocations = {
  name: "source-locations",
  setup(b) {
    b.onLoad({ filter: /\.(ts|mts|js|mjs)$/ }, async (args) => {
      if (args.path.includes(`${join("node_modules", "")}`)) return undefined;
      const text = await readFile(args.path, "utf8");
      const contents = text
        .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href))
        .replaceAll("import.meta.dirname", JSON.stringify(dirname(args.path)))
        .replaceAll("import.meta.filename", JSON.stringify(args.path));
      return { contents, loader: args.path.endsWith("ts") ? "ts" : "js" };
    });
  },
};

const only = process.argv.slice(2).map((f) => relative(ROOT, resolve(f)));
const files = only.length > 0 ? only : [...find("src"), ...find("test")].sort();

rmSync(OUT, { recursive: true, force: true });
await build({
  absWorkingDir: ROOT,
  entryPoints: files.map((f) => ({ in: f, out: f.replace(/\.ts$/, "") })),
  outdir: OUT,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  packages: "external",
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "linked",
  logLevel: "warning",
  plugins: [sourceLocations],
});

// --expose-gc: test/webhooks-fairness.test.ts collects garbage mid-request to prove a delivery's
// deadline survives it. The runner passes these flags on to each test file's process.
// Two files at once: one file alone left a core idle much of the time (waiting on anvil, Alto,
// child processes and timers; the embedded suite used 1.3 cores on average, the PostgreSQL one
// 0.95). On the 2-core CI machine, quiet, measured the same hour: embedded 427 s → 294 s,
// PostgreSQL + Redis 378 s → 222 s, with the same CPU time. Every file has its own database
// schema or PGlite store, its own anvil and ports, and random project ids and keys on the
// shared Redis, so files never meet.
const concurrency = Number(process.env.TEST_CONCURRENCY ?? 2);
const result = spawnSync(
  process.execPath,
  [
    "--expose-gc",
    "--enable-source-maps",
    "--test",
    `--test-concurrency=${concurrency}`,
    "--test-reporter=spec",
    ...files.map((f) => join(OUT, f.replace(/\.ts$/, ".mjs"))),
  ],
  { stdio: "inherit", cwd: ROOT },
);
process.exit(result.status ?? 1);
