// Runs the test suite with node's test runner: every test file (or the files named on the command
// line) compiled first, then run several files to a process (see the groups below).
//
// Why compile first: loading the service's TypeScript through tsx's loader cost each test process
// about 3.5 s of CPU before its first test (measured on the 2-core CI machine: importing
// test/support/app.ts took 3.3–3.7 s of CPU through tsx, 1.1–1.4 s as one esbuild bundle), and
// the suite runs about a hundred processes per store. esbuild (the compiler tsx itself uses)
// bundles each test file with the sources it imports into .test-build/<pid>/, packages left external,
// in about a second for all of them.
//
// Every module keeps the location of its source: `import.meta.url` and `import.meta.dirname` are
// replaced, file by file, with the source file's own, so paths built from them (the migrations,
// contract artifacts, dist/server.js, fixtures) resolve as they do uncompiled. Stack traces map
// back to the TypeScript through the bundles' source maps.
//
// Files run in groups, each group in a process of its own (node --test with the spec reporter),
// TEST_CONCURRENCY processes at a time, longest first by the last recorded timings
// (test/timings.json): with two at once, a long group started last would leave one core idle at
// the end. A process's output is printed whole when it ends, headed by its files and wall time, so
// two processes' lines never interleave; a process that runs past TEST_FILE_TIMEOUT_MS is stopped
// and what it printed is shown. The run ends with the totals and the slowest files.
//
//   node scripts/run-tests.mjs [files…]
//   TEST_CONCURRENCY=n      test processes run at once (default 2)
//   TEST_FILE_TIMEOUT_MS=n  longest a test process may run (default 15 minutes)
//   TEST_EXIT_GRACE_MS=n    longest a test process may go on once all its files have ended
//                           (default 60 s; past it the group fails: something holds it open)
//   TEST_GROUP_SECONDS=n    recorded seconds of files run in one process (default 45; 0: one file
//                           per process)
//   TEST_TIMINGS_SAVE=1     after a run of every file, write its timings to test/timings.json
//   TEST_SCOPE=store        only the files whose outcome the store can change (CI's second pass;
//                           see storeDependent below)
//   TEST_ALSO="files…"      with TEST_SCOPE=store, these files run too whatever their scope (CI's
//                           second pass runs on Node 24 and takes the runtime's own tests with it)
//   TEST_KEEP_BUILD=1       keep this run's bundles (to run one under --cpu-prof, say); a later
//                           run clears them
//   TEST_LIST=1             print the processes and their files, run nothing
//   TEST_CPU=1              also measure each process's CPU time (its own and every process it
//                           started and waited for: anvil, Alto, Chromium), print it beside the
//                           wall time and list the processes that cost the most CPU
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
// Each run builds into a folder of its own (.test-build/<pid>), removed when it ends: a second run
// started in the same checkout (one file tried while the suite runs) used to delete the first's
// bundles under it. Folders of runs whose process is gone are cleared at the start.
const BUILDS = join(ROOT, ".test-build");
const OUT = join(BUILDS, String(process.pid));

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

for (const entry of existsSync(BUILDS) ? readdirSync(BUILDS) : []) {
  if (!/^\d+$/.test(entry) || !alive(Number(entry)))
    rmSync(join(BUILDS, entry), { recursive: true, force: true });
}
/** Whether a process with this id is running (signal 0 only checks). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM";
  }
}
const built = await build({
  metafile: true,
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
  // Modules two test files share (the service, the test support) become shared chunks, so that a
  // process running several files (see the groups below) loads and compiles each once.
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  logLevel: "warning",
  plugins: [sourceLocations],
});

// --liftoff-only: PGlite is WebAssembly, which V8 compiles quickly (Liftoff) and then again,
// optimised, for the functions it finds hot (TurboFan, on background threads). A test process
// lives for a minute and mostly starts things; it did not earn that second compile back. The
// embedded suite, three processes at once, the same half hour of 2026-11-30 (a slow day on this
// 2-core machine): 517 s and 888 s of CPU without it, 452 s and 754 s with it (and with it for the
// servers and CLIs the tests start, test/support/server-process.ts). It changes how V8 compiles,
// not what the code does; production starts without it.
// --expose-gc: test/webhooks-fairness.test.ts collects garbage mid-request to prove a delivery's
// deadline survives it.
// Two files at once: one file alone left a core idle much of the time (waiting on anvil, Alto,
// child processes and timers; the embedded suite used 1.3 cores on average, the PostgreSQL one
// 0.95). On the 2-core CI machine, quiet, measured the same hour: embedded 427 s → 294 s,
// PostgreSQL + Redis 378 s → 222 s, with the same CPU time. Every file has its own database
// schema or PGlite store, its own anvil and ports, and random project ids and keys on the
// shared Redis, so files never meet.
/**
 * Whether a test file's outcome can depend on the store the run is given. A file that cannot read
 * DATABASE_URL or REDIS_URL (no module in its bundle, packages aside, names either) runs the same
 * on every store: the contract tests, the pure unit tests. A file may also say so itself, on its
 * first line (`// test-scope: store-free — why`), when it only reads them to keep them from the
 * processes it starts. CI runs every file in its embedded pass and, with TEST_SCOPE=store, only the
 * store-dependent ones again on PostgreSQL + Redis: the rest would repeat the same run.
 */
function storeDependent(file) {
  if (firstLineSays(file, "test-scope: store-free")) return false;
  const entry = Object.entries(built.metafile.outputs).find(([, o]) => o.entryPoint === file);
  if (!entry) return true;
  return sourcesOf(entry[0]).some((input) => !input.includes("node_modules") && namesStore(input));
}

/**
 * The sources in a bundle: its own, and those of the shared chunks it imports (what esbuild's
 * splitting moved out of it), followed import by import.
 */
function sourcesOf(outputPath, seen = new Set()) {
  if (seen.has(outputPath)) return [];
  seen.add(outputPath);
  const output = built.metafile.outputs[outputPath];
  if (!output) return [];
  return [
    ...Object.keys(output.inputs),
    ...output.imports.filter((i) => !i.external).flatMap((i) => sourcesOf(i.path, seen)),
  ];
}

/** Whether a test file's first line is the comment `// <marker>` (followed by why). */
function firstLineSays(file, marker) {
  return new RegExp(`^// ${marker}\\b`).test(readFileSync(join(ROOT, file), "utf8"));
}

/** Whether a source file names DATABASE_URL or REDIS_URL; each file is read once, however many bundles share it. */
const storeNamed = new Map();
function namesStore(input) {
  let named = storeNamed.get(input);
  if (named === undefined) {
    named = /DATABASE_URL|REDIS_URL/.test(readFileSync(join(ROOT, input), "utf8"));
    storeNamed.set(input, named);
  }
  return named;
}

const scope = process.env.TEST_SCOPE ?? "all";
if (scope !== "all" && scope !== "store") {
  console.error(`TEST_SCOPE must be "all" or "store", not ${JSON.stringify(scope)}`);
  process.exit(2);
}
const also = (process.env.TEST_ALSO ?? "")
  .split(/\s+/)
  .filter((f) => f !== "")
  .map((f) => relative(ROOT, resolve(f)));
const unknown = also.filter((f) => !files.includes(f));
if (scope !== "store" && also.length > 0) {
  console.error("TEST_ALSO adds files to TEST_SCOPE=store only");
  process.exit(2);
}
if (unknown.length > 0) {
  console.error(`TEST_ALSO names files this run does not have: ${unknown.join(", ")}`);
  process.exit(2);
}
const storeFree = scope === "store" ? files.filter((f) => !also.includes(f) && !storeDependent(f)) : [];
const chosen = files.filter((f) => !storeFree.includes(f));
if (storeFree.length > 0) {
  console.log(
    `TEST_SCOPE=store: ${storeFree.length} files that cannot reach the store are left to the embedded pass: ${storeFree.join(", ")}`,
  );
}

const concurrency = Math.max(1, Number(process.env.TEST_CONCURRENCY ?? 2));
const fileTimeoutMs = Number(process.env.TEST_FILE_TIMEOUT_MS ?? 15 * 60_000);
const exitGraceMs = Number(process.env.TEST_EXIT_GRACE_MS ?? 60_000);
// The test processes running now (each the leader of its process group), stopped with the run.
const live = new Set();
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    for (const pid of live) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {}
    }
    process.exit(signal === "SIGINT" ? 130 : 143);
  });
}
const TIMINGS = join(ROOT, "test", "timings.json");
const known = existsSync(TIMINGS) ? JSON.parse(readFileSync(TIMINGS, "utf8")) : {};
// A file with no recorded time counts as long (it may be a new slow one).
const expected = (file) => known[file] ?? 60_000;

/**
 * Test files run several to a process. Each file used to start a node of its own and load the
 * service and its packages, compile PGlite's WebAssembly and the routes' schemas and warm up the
 * JIT before its first test: about 2 s of CPU per file, paid some 270 times per CI run. A group's
 * entry module wraps each file in a suite of its own, named by the file, and imports it inside
 * that suite, so that the file's tests and root-level hooks (before, after, beforeEach) belong to
 * its suite alone: files run one after the other, each as it would alone, sharing only what
 * modules keep (caches, compiled code). Groups hold about TEST_GROUP_SECONDS of files by their
 * recorded times (longest files alone); a file that must have a process of its own says so on
 * its first line: `// test-process: own — why`.
 */
const groupMs = Number(process.env.TEST_GROUP_SECONDS ?? 45) * 1000;
const ownProcess = (file) => firstLineSays(file, "test-process: own");
const groups = [];
{
  const open = [];
  for (const file of [...chosen].sort((a, b) => expected(b) - expected(a))) {
    if (groupMs <= 0 || expected(file) >= groupMs || ownProcess(file)) {
      groups.push({ files: [file], ms: expected(file) });
      continue;
    }
    // First fit, longest files first: each lands in the first group it still fits in.
    let group = open.find((g) => g.ms + expected(file) <= groupMs);
    if (!group) {
      group = { files: [], ms: 0 };
      open.push(group);
      groups.push(group);
    }
    group.files.push(file);
    group.ms += expected(file);
  }
}
// Longest first: with a long group started last, one core would sit idle at the end.
const queue = [...groups].sort((a, b) => b.ms - a.ms);
if (process.env.TEST_LIST === "1") {
  for (const g of queue) console.log(`${(g.ms / 1000).toFixed(0).padStart(4)} s  ${g.files.join(" ")}`);
  console.log(`${chosen.length} files in ${groups.length} processes`);
  rmSync(OUT, { recursive: true, force: true });
  process.exit(0);
}

const measureCpu = process.env.TEST_CPU === "1";
const CPU_MARK = "\n@@test-cpu@@ ";
const cpu = {};

const totals = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
const timings = {};
const failed = [];
/** What the spec reporter said of each failing test (failureSummary), printed at the end of the run. */
const failures = [];
/** At most this many of those lines: the end of a long log is what survives of it. */
const FAILURE_LINES = 60;
const started = Date.now();

const bundleOf = (file) => join(OUT, file.replace(/\.ts$/, ".mjs"));

/**
 * The module a group's process runs: it imports its one file's bundle, or each of its files' in a
 * suite named by the file, and ends with a root `after` hook that closes the spare test stores
 * (test/support/app.ts): an open PGlite left behind held every process open about 10 s after its
 * last test. Root hooks run once every file's own have.
 */
const CLOSE_SPARES = `after(() => globalThis[Symbol.for("gss.test.closeSpareStores")]?.());`;

function entryOf(group, index) {
  const entry = join(OUT, "groups", `group-${index}.mjs`);
  mkdirSync(dirname(entry), { recursive: true });
  const url = (f) => JSON.stringify(pathToFileURL(bundleOf(f)).href);
  const body =
    group.files.length === 1
      ? [`import { after } from "node:test";`, `import ${url(group.files[0])};`]
      : [
          `import { after, describe } from "node:test";`,
          ...group.files.map(
            (f) => `describe(${JSON.stringify(f)}, async () => {\n  await import(${url(f)});\n});`,
          ),
        ];
  writeFileSync(entry, `${[...body, CLOSE_SPARES].join("\n")}\n`);
  return entry;
}

let groupsStarted = 0;
function runGroup(group) {
  const name =
    group.files.length === 1 ? group.files[0] : `${group.files.length} files: ${group.files.join(", ")}`;
  const entry = entryOf(group, groupsStarted++);
  return new Promise((done) => {
    const t0 = Date.now();
    const args = [
      "--liftoff-only",
      "--expose-gc",
      "--enable-source-maps",
      "--test",
      "--test-reporter=spec",
      entry,
    ];
    // With TEST_CPU=1 the file runs under a shell whose `times` builtin then reports the CPU of
    // every process it waited for, descendants included (node has no rusage for a child).
    const child = measureCpu
      ? spawn(
          "bash",
          ["-c", `"$0" "$@"; rc=$?; echo "${CPU_MARK}" >&2; times >&2; exit $rc`, process.execPath, ...args],
          { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true },
        )
      : spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
    // node --test runs the file in a process of its own: the group is a process group, stopped whole.
    live.add(child.pid);
    const stop = () => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const chunks = [];
    let stuck = null;
    // A group of several files runs each as a suite named by the file, whose result line says it
    // ended (a file alone in its process has no such line: only the timeout stops it).
    const ended = new Set();
    let partial = "";
    const decoder = new StringDecoder("utf8");
    const onData = (c) => {
      chunks.push(c);
      if (stuck || group.files.length === 1) return;
      const lines = (partial + decoder.write(c)).split("\n");
      partial = lines.pop();
      for (const line of lines) {
        const m = /^[✔✖] (\S+) \([\d.]+ms\)$/.exec(line);
        if (m) ended.add(m[1]);
      }
      // Every file of the group has ended, and the process must now exit: what keeps it open past
      // the grace (a timer or a connection a test left) fails the group now, not at the timeout.
      if (group.files.every((f) => ended.has(f)))
        stuck = setTimeout(() => {
          hung = true;
          stop();
        }, exitGraceMs);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    let timedOut = false;
    let hung = false;
    const timer = setTimeout(() => {
      timedOut = true;
      stop();
    }, fileTimeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      clearTimeout(stuck);
      live.delete(child.pid);
      const ms = Date.now() - t0;
      let text = Buffer.concat(chunks).toString("utf8");
      let cpuNote = "";
      if (measureCpu) {
        const mark = text.lastIndexOf(CPU_MARK);
        if (mark >= 0) {
          // `times` prints the shell's own user and system time, then its children's.
          const seconds = [
            ...text
              .slice(mark + CPU_MARK.length)
              .trim()
              .split("\n")
              .at(-1)
              .matchAll(/(\d+)m([\d.]+)s/g),
          ].map((m) => Number(m[1]) * 60 + Number(m[2]));
          cpu[name] = seconds.reduce((a, b) => a + b, 0);
          cpuNote = `, ${cpu[name].toFixed(1)} s CPU`;
          text = text.slice(0, mark);
        }
      }
      for (const key of Object.keys(totals)) {
        const m = new RegExp(`^ℹ ${key} (\\d+)$`, "m").exec(text);
        if (m) totals[key] += Number(m[1]);
      }
      const ok = code === 0 && !timedOut && !hung;
      if (!ok) failures.push(...failureSummary(text));
      if (group.files.length === 1) {
        timings[group.files[0]] = ms;
        if (!ok) failed.push(group.files[0]);
      } else {
        // Each file is a suite of the group's run: its result line gives its outcome and time.
        for (const file of group.files) {
          const line = new RegExp(`^([✔✖]) ${escapeRegExp(file)} \\(([\\d.]+)ms\\)$`, "m").exec(text);
          if (line) timings[file] = Math.round(Number(line[2]));
          if (!ok && (!line || line[1] === "✖" || timedOut || hung)) failed.push(file);
        }
      }
      const why = timedOut
        ? `, stopped after ${fileTimeoutMs} ms`
        : hung
          ? `, stopped: still running ${exitGraceMs} ms after its last file ended (something a test left holds it open)`
          : ok
            ? ""
            : `, exit ${code ?? signal}`;
      process.stdout.write(`\n── ${name} (${(ms / 1000).toFixed(1)} s${cpuNote}${why})\n${text}`);
      done();
    });
  });
}

/**
 * The spec reporter's "failing tests" section of a process's output, cut to what says why: each
 * test's name, its error's message and fields, and the first stack frame in a test file. The run
 * prints these last, so the end of a CI log (often all that is kept of it) says why a test failed.
 */
function failureSummary(text) {
  const start = text.lastIndexOf("✖ failing tests:");
  // A process stopped before its end (its timeout, or held open past the grace) never printed
  // that section: its failed tests' names, as they came, are what there is.
  if (start < 0) return text.split("\n").filter((line) => line.trimStart().startsWith("✖ "));
  const out = [];
  let framed = false;
  for (const line of text.slice(start).split("\n").slice(1)) {
    const trimmed = line.trim();
    if (trimmed.startsWith("ℹ ")) break;
    if (trimmed === "" || trimmed.startsWith("test at ")) continue;
    if (trimmed.startsWith("✖ ")) framed = false;
    if (trimmed.startsWith("at ")) {
      if (framed || !/[/\\](test|src)[/\\]/.test(trimmed) || trimmed.includes("node_modules")) continue;
      framed = true;
    }
    out.push(line.length > 300 ? `${line.slice(0, 300)}…` : line);
  }
  return out;
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

async function worker() {
  for (let group = queue.shift(); group !== undefined; group = queue.shift()) await runGroup(group);
}

await Promise.all(Array.from({ length: Math.min(concurrency, groups.length) }, worker));

const wall = ((Date.now() - started) / 1000).toFixed(0);
console.log(
  `\n${chosen.length} files (${groups.length} processes) in ${wall} s, ${concurrency} at once: ${totals.tests} tests, ${totals.pass} passed, ${totals.fail} failed, ${totals.cancelled} cancelled, ${totals.skipped} skipped, ${totals.todo} todo`,
);
if (chosen.length > 1) {
  console.log("slowest files:");
  for (const [file, ms] of Object.entries(timings)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10))
    console.log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`);
}
if (measureCpu && chosen.length > 1) {
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  console.log(`CPU: ${total.toFixed(0)} s in all; most CPU:`);
  for (const [file, s] of Object.entries(cpu)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25))
    console.log(`  ${s.toFixed(1).padStart(6)} s  ${file}`);
}
if (failures.length > 0) {
  const shown = failures.slice(0, FAILURE_LINES);
  console.log(`why (the failing tests' errors, ${shown.length} of ${failures.length} lines):`);
  for (const line of shown) console.log(`  ${line}`);
}
if (failed.length > 0) console.log(`failed: ${failed.join(", ")}`);
if (process.env.TEST_TIMINGS_SAVE === "1" && only.length === 0 && scope === "all") {
  const sorted = Object.fromEntries(Object.entries(timings).sort((a, b) => a[0].localeCompare(b[0])));
  writeFileSync(TIMINGS, `${JSON.stringify(sorted, null, 2)}\n`);
}
if (process.env.TEST_KEEP_BUILD === "1")
  console.log(`bundles kept in ${relative(ROOT, OUT)} (TEST_KEEP_BUILD=1)`);
else rmSync(OUT, { recursive: true, force: true });
process.exit(failed.length > 0 ? 1 : 0);
