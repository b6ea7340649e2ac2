// The production build: src/ compiled by tsc into dist/ (relative `.ts` imports rewritten to
// `.js`), with the files the server reads at run time beside the code (the SQL migrations and functions).
// dist/server.js then runs on plain Node, without tsx.
//
//   node scripts/build.mjs              build (exit 1 on a type error)
//   node scripts/build.mjs --if-stale   build only when src/ changed since the last build; a type
//                                       error is reported but the emitted code is kept (what
//                                       `npm start` runs before `node dist/server.js`)
//   node scripts/build.mjs --no-check   emit without type-checking (tsc --noCheck: the same files,
//                                       10.5 s instead of 16.6 on the CI machine), for where the
//                                       type-check runs anyway (CI runs it beside the tests)
//
// Plain JavaScript on purpose: it runs before anything is compiled, and without devDependencies
// when dist/ is already built (a production image installed with --omit=dev).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const DIST = join(ROOT, "dist");
const STAMP = join(DIST, ".build-hash");
/** Runtime files that are not TypeScript, copied beside the compiled code (same relative path). */
const ASSETS = [
  { from: "src/db/migrations", ext: [".sql"] },
  { from: "src/db/functions", ext: [".sql"] },
  // The web dashboard's static files (plain ES modules, HTML, CSS: no build step of their own).
  { from: "src/dashboard/public", ext: [".html", ".js", ".css", ".svg"] },
];
const INPUTS = ["tsconfig.json", "tsconfig.build.json", "package.json"];

const ifStale = process.argv.includes("--if-stale");
const noCheck = process.argv.includes("--no-check");

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return sourceFiles(path);
      return /\.(ts|sql|html|js|css|svg)$/.test(e.name) && !e.name.endsWith(".test.ts") ? [path] : [];
    })
    .sort();
}

/** What the build depends on: every source file, the build settings, the compiler's version. */
function inputHash() {
  const hash = createHash("sha256");
  for (const path of [...sourceFiles(join(ROOT, "src")), ...INPUTS.map((p) => join(ROOT, p))]) {
    hash.update(relative(ROOT, path)).update("\0").update(readFileSync(path)).update("\0");
  }
  hash.update(typescriptVersion() ?? "no typescript");
  return hash.digest("hex");
}

function typescriptBin() {
  try {
    return createRequire(join(ROOT, "package.json")).resolve("typescript/bin/tsc");
  } catch {
    return null;
  }
}

function typescriptVersion() {
  const bin = typescriptBin();
  if (!bin) return null;
  return JSON.parse(readFileSync(join(dirname(bin), "..", "package.json"), "utf8")).version;
}

function log(message) {
  console.error(`build: ${message}`);
}

function build(hash) {
  const tsc = typescriptBin();
  if (!tsc) {
    log(
      "TypeScript is not installed (a production install with --omit=dev?): run `npm ci && npm run build` first",
    );
    process.exit(1);
  }
  // Built beside dist/ and swapped in whole: a server starting meanwhile (another terminal,
  // another test file) never sees half a dist/, and a file deleted from src/ leaves dist/ too.
  removeAbandonedStaging();
  const staging = join(ROOT, `.dist-${process.pid}`);
  const started = Date.now();
  const result = spawnSync(
    process.execPath,
    [tsc, "-p", join(ROOT, "tsconfig.build.json"), "--outDir", staging, ...(noCheck ? ["--noCheck"] : [])],
    {
      cwd: ROOT,
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  if (!existsSync(join(staging, "server.js"))) {
    rmSync(staging, { recursive: true, force: true });
    log("tsc produced no server.js");
    process.exit(1);
  }
  for (const asset of ASSETS) {
    const target = join(staging, relative("src", asset.from));
    mkdirSync(target, { recursive: true });
    for (const name of readdirSync(join(ROOT, asset.from))) {
      if (asset.ext.some((ext) => name.endsWith(ext)))
        copyFileSync(join(ROOT, asset.from, name), join(target, name));
    }
  }
  const typed = result.status === 0;
  if (!typed && !ifStale) {
    rmSync(staging, { recursive: true, force: true });
    log("type errors (above): the build failed");
    process.exit(1);
  }
  // Without the stamp, the next start checks again.
  if (typed) writeFileSync(join(staging, ".build-hash"), `${hash}\n`);
  const old = join(ROOT, `.dist-old-${process.pid}`);
  if (existsSync(DIST)) renameSync(DIST, old);
  renameSync(staging, DIST);
  rmSync(old, { recursive: true, force: true });
  if (typed) log(`dist/ built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  // Like `tsx src/server.ts` before it, `npm start` runs code with type errors.
  else log("type errors (above): starting with the emitted code anyway; fix them before shipping");
}

/** Staging directories of builds that were killed midway (their process is gone). */
function removeAbandonedStaging() {
  for (const name of readdirSync(ROOT)) {
    const m = /^\.dist-(?:old-)?(\d+)$/.exec(name);
    if (!m) continue;
    try {
      process.kill(Number(m[1]), 0);
    } catch {
      rmSync(join(ROOT, name), { recursive: true, force: true });
    }
  }
}

if (!existsSync(join(ROOT, "src"))) {
  // An image that ships dist/ alone: nothing to build from, nothing to compare with.
  if (ifStale && existsSync(join(DIST, "server.js"))) process.exit(0);
  log("src/ is missing: nothing to build");
  process.exit(1);
}
const hash = inputHash();
if (ifStale && existsSync(STAMP) && readFileSync(STAMP, "utf8").trim() === hash) process.exit(0);
if (ifStale && existsSync(join(DIST, "server.js")) && !typescriptBin()) {
  // A production install without devDependencies: dist/ is what was shipped.
  log("dist/ may be older than src/, and TypeScript is not installed to rebuild it: using dist/ as is");
  process.exit(0);
}
if (ifStale) log(existsSync(DIST) ? "src/ changed since the last build: rebuilding dist/" : "building dist/");
build(hash);
