// The production build: src/ compiled by tsc into dist/ (relative `.ts` imports rewritten to
// `.js`), with the files the server reads at run time beside the code (the SQL migrations).
// dist/server.js then runs on plain Node, without tsx.
//
//   node scripts/build.mjs              build (exit 1 on a type error)
//   node scripts/build.mjs --if-stale   build only when src/ changed since the last build; a type
//                                       error is reported but the emitted code is kept (what
//                                       `npm start` runs before `node dist/server.js`)
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
const ASSETS = [{ from: "src/db/migrations", ext: ".sql" }];
const INPUTS = ["tsconfig.json", "tsconfig.build.json", "package.json"];

const ifStale = process.argv.includes("--if-stale");

function sourceFiles(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return sourceFiles(path);
      return /\.(ts|sql)$/.test(e.name) && !e.name.endsWith(".test.ts") ? [path] : [];
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
  // A clean output: a source file deleted since the last build must not live on in dist/.
  rmSync(DIST, { recursive: true, force: true });
  const started = Date.now();
  const result = spawnSync(process.execPath, [tsc, "-p", join(ROOT, "tsconfig.build.json")], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (!existsSync(join(DIST, "server.js"))) {
    log("tsc produced no dist/server.js");
    process.exit(1);
  }
  for (const asset of ASSETS) {
    const target = join(DIST, relative("src", asset.from));
    mkdirSync(target, { recursive: true });
    for (const name of readdirSync(join(ROOT, asset.from))) {
      if (name.endsWith(asset.ext)) copyFileSync(join(ROOT, asset.from, name), join(target, name));
    }
  }
  if (result.status !== 0) {
    if (!ifStale) {
      log("type errors (above): dist/ was written but the build failed");
      process.exit(1);
    }
    // Like `tsx src/server.ts` before it, `npm start` runs code with type errors; the stamp is not
    // written, so the next start checks again.
    log("type errors (above): starting with the emitted code anyway; fix them before shipping");
    return;
  }
  writeFileSync(STAMP, `${hash}\n`);
  log(`dist/ built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
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
