/**
 * Issue 25, the container: what the image built by the Dockerfile holds, worked out without a
 * Docker daemon (CI has none). The build context is what .dockerignore admits from this
 * repository plus planted secrets (a signer key in data/, .env files, key files, node_modules);
 * each stage's files follow from its COPY instructions, the build stage's `npm run build` output
 * is the real dist/, and its `npm ci` / `npm prune` packages follow from package-lock.json with
 * npm's own omit rules. Checked: no secret reaches the context or either stage, no package that
 * only development needs reaches the runtime stage, the runtime stage runs as a non-root user
 * with a HEALTHCHECK and an exec-form CMD, and the compiled server and operator CLIs load and run
 * on plain Node from the runtime stage's files alone (no tsx, no devDependency on the path).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  afterPrune,
  applyCopy,
  contextFiles,
  type Dockerfile,
  dockerignore,
  execForm,
  type Lock,
  parseCopy,
  parseDockerfile,
  reachableFromProduction,
  type Stage,
} from "./support/container-image.ts";
import { ensureBuilt, REPO_ROOT } from "./support/server-process.ts";

const dockerfile: Dockerfile = parseDockerfile(readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8"));
const ignore = dockerignore(readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8"));
const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as Lock;
const rootPackage = lock.packages[""]!;

/** Files a careless checkout could hold beside the sources; none may reach the context. */
const PLANTED = [
  "data/signer.key",
  "data/secrets.key",
  "data/pglite/PG_VERSION",
  ".env",
  ".env.production",
  "src/.env.local",
  "src/operator/owner.key",
  "ops/tls/server.pem",
  "node_modules/left-pad/index.js",
  "test/support/anvil-binary/node_modules/@foundry-rs/anvil-linux-amd64/anvil",
];

/** A secret by its path: the data directory, environment files, key and certificate files. */
function secretPath(path: string): boolean {
  const p = path.replace(/^\/+/, "");
  return (
    /(^|\/)data\//.test(p) ||
    (/(^|\/)\.env(\.|$)/.test(p) && !p.endsWith(".env.example")) ||
    /\.(key|pem)$/.test(p)
  );
}

const runtime = dockerfile.stages.at(-1)!;
const build = dockerfile.stages.find((s) => s.name !== null && s !== runtime)!;
const of = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);

/** The build stage's RUN commands, one `&&`-joined step each. */
const runSteps = (stage: Stage) =>
  of(stage, "RUN").flatMap((i) => i.rest.split("&&").map((s) => s.trim().replace(/\s+/g, " ")));

interface StageContents {
  /** Absolute path in the stage → where it came from (a context path or a build-stage path). */
  files: Map<string, string>;
  /** Lock keys (node_modules/...) installed under /app/node_modules. */
  packages: Set<string>;
}

/** The files of the real dist/, as `npm run build` leaves them (built from the same sources). */
function distFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(REPO_ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(path);
      else out.push(path);
    }
  };
  walk("dist");
  return out;
}

function workdirOf(stage: Stage): string {
  const w = of(stage, "WORKDIR");
  return w.at(-1)?.rest ?? "/";
}

function buildStage(context: string[]): StageContents {
  const files = new Map<string, string>();
  let packages = new Set<string>();
  const workdir = workdirOf(build);
  for (const instruction of build.instructions) {
    if (instruction.keyword === "COPY") {
      const copy = parseCopy(instruction.rest);
      assert.equal(copy.from, null, "the build stage copies from the build context only");
      for (const [to, from] of applyCopy(copy, context, workdir)) files.set(to, from);
    }
  }
  for (const step of runSteps(build)) {
    if (step.startsWith("npm ci ")) {
      packages = new Set(Object.keys(lock.packages).filter((k) => k.startsWith("node_modules/")));
    } else if (step === "npm rebuild secp256k1") {
      // Runs secp256k1's install script in place: no file enters or leaves the stage's list.
    } else if (step === "npm run build") {
      for (const f of distFiles()) files.set(posix.join(workdir, f), f);
    } else if (step.startsWith("npm prune ")) {
      const omit = new Set([...step.matchAll(/--omit=(\w+)/g)].map((m) => m[1]!));
      const kept = afterPrune(lock, omit);
      packages = new Set([...packages].filter((k) => kept.has(k)));
    } else {
      assert.fail(`the build stage runs \`${step}\`, which this test does not model: teach it`);
    }
  }
  return { files, packages };
}

function runtimeStage(context: string[], built: StageContents): StageContents {
  const files = new Map<string, string>();
  let packages = new Set<string>();
  const workdir = workdirOf(runtime);
  const buildFiles = [...built.files.keys()];
  for (const instruction of of(runtime, "COPY")) {
    const copy = parseCopy(instruction.rest);
    if (copy.from === null) {
      for (const [to, from] of applyCopy(copy, context, workdir)) files.set(to, from);
      continue;
    }
    assert.equal(copy.from, build.name, "the runtime stage copies from the build stage");
    for (const source of copy.sources) {
      const abs = posix.resolve(workdirOf(build), source);
      if (abs === posix.join(workdirOf(build), "node_modules")) {
        assert.equal(posix.resolve(workdir, copy.dest), posix.join(workdir, "node_modules"));
        packages = new Set(built.packages);
        continue;
      }
      const single = { ...copy, sources: [abs.slice(1)] };
      const rel = buildFiles.map((f) => f.slice(1));
      for (const [to, from] of applyCopy(single, rel, workdir)) files.set(to, built.files.get(`/${from}`)!);
    }
  }
  return { files, packages };
}

describe("the container image, without a daemon", () => {
  let context: string[];
  let built: StageContents;
  let image: StageContents;
  let assembled: string;

  before(() => {
    ensureBuilt();
    context = [...contextFiles(REPO_ROOT, ignore), ...PLANTED.filter((p) => !ignore.excluded(p))];
    built = buildStage(context);
    image = runtimeStage(context, built);
    // The runtime stage's files on disk: dist/, package.json and artifacts copied, each runtime
    // package linked from this checkout's node_modules (run with --preserve-symlinks, so a package
    // resolves its own imports here, where no devDependency is).
    assembled = mkdtempSync(join(tmpdir(), "gss-image-"));
    for (const [to, from] of image.files) {
      const target = join(assembled, posix.relative(workdirOf(runtime), to));
      mkdirSync(dirname(target), { recursive: true });
      cpSync(join(REPO_ROOT, from), target);
    }
    for (const key of image.packages) {
      if (key.split("/node_modules/").length > 1) continue; // nested: comes with its parent
      const target = join(assembled, key);
      mkdirSync(dirname(target), { recursive: true });
      symlinkSync(join(REPO_ROOT, key), target, "dir");
    }
  });

  after(() => rmSync(assembled, { recursive: true, force: true }));

  it(".dockerignore follows Docker's matching: anchored at the root, `**` anywhere, `!` re-includes", () => {
    assert.ok(ignore.excluded("data"));
    assert.ok(ignore.excluded("data/pglite/base/1/1259"));
    assert.ok(ignore.excluded("app.log"));
    assert.ok(!ignore.excluded("src/app.log"), "`*.log` is anchored at the context root, as in Docker");
    assert.ok(ignore.excluded("src/deep/.env.test"), "`**/.env.*` reaches every directory");
    assert.ok(!ignore.excluded(".env.example"), "the documented template is re-included");
    assert.ok(!ignore.excluded("src/dashboard/public/index.html"));
    assert.ok(!ignore.excluded("src/environment.ts"));
  });

  it("no secret, dependency or build output of the checkout enters the build context", () => {
    for (const p of PLANTED) assert.ok(ignore.excluded(p), `${p} is in the build context`);
    assert.deepEqual(context.filter(secretPath), []);
    assert.deepEqual(
      context.filter((p) => /(^|\/)(node_modules|dist|\.git|\.test-build)(\/|$)/.test(p)),
      [],
    );
    assert.ok(context.includes("src/server.ts") && context.includes("package-lock.json"));
  });

  it("no secret reaches the build stage or the runtime stage", () => {
    assert.deepEqual([...built.files.keys()].filter(secretPath), []);
    assert.deepEqual([...image.files.keys()].filter(secretPath), []);
    assert.ok(![...image.files.keys()].some((p) => p.includes(".env")), "not even .env.example");
  });

  it("the build stage has every input of `npm run build`", () => {
    const files = built.files;
    for (const input of ["package.json", "tsconfig.json", "tsconfig.build.json", "scripts/build.mjs"])
      assert.ok(files.has(`/app/${input}`), `${input} is not in the build stage`);
    const sources = context.filter((p) => p.startsWith("src/") && !p.endsWith(".test.ts"));
    assert.deepEqual(
      sources.filter((p) => !files.has(`/app/${p}`)),
      [],
    );
  });

  it("the runtime stage holds the server, both operator CLIs and the artifacts they read, nothing else", () => {
    const files = [...image.files.keys()];
    for (const entry of ["dist/server.js", "dist/operator/main.js", "dist/secrets/main.js", "package.json"])
      assert.ok(files.includes(`/app/${entry}`), `${entry} is not in the image`);
    // The contracts the operator CLI deploys (src/operator/paymaster-commands.ts, ARTIFACT).
    const commands = readFileSync(join(REPO_ROOT, "src/operator/paymaster-commands.ts"), "utf8");
    const artifacts = [.../const ARTIFACT = \{([^}]*)\}/.exec(commands)![1]!.matchAll(/"(\w+)"\s*(?:,|$)/g)];
    assert.ok(artifacts.length >= 2);
    for (const [, name] of artifacts)
      assert.ok(files.includes(`/app/contracts/artifacts/${name}.json`), name);
    const outside = files.filter(
      (p) =>
        !p.startsWith("/app/dist/") &&
        !p.startsWith("/app/contracts/artifacts/") &&
        p !== "/app/package.json",
    );
    assert.deepEqual(outside, [], "sources, tests and scripts stay in the build stage");
  });

  it("no package that only development needs reaches the runtime stage", () => {
    const reachable = reachableFromProduction(lock, { optional: true });
    const required = reachableFromProduction(lock, { optional: false });
    const devOnly = [...image.packages].filter((k) => !reachable.has(k));
    assert.deepEqual(devOnly, [], "reachable only through devDependencies or as an optional peer");
    assert.deepEqual(
      [...required].filter((k) => !image.packages.has(k)),
      [],
      "a package production requires is missing",
    );
    for (const name of Object.keys(rootPackage.devDependencies ?? {}))
      assert.ok(!image.packages.has(`node_modules/${name}`), `the devDependency ${name} is in the image`);
    for (const name of ["typescript", "tsx", "esbuild", "zod"])
      assert.ok(!image.packages.has(`node_modules/${name}`), name);
    // What --omit=optional drops from the production tree: pg-cloudflare, which pg loads only on
    // Cloudflare Workers. A new optional package of a production dependency shows up here.
    assert.deepEqual(
      [...reachable].filter((k) => !image.packages.has(k)),
      ["node_modules/pg-cloudflare"],
    );
  });

  it("the image takes no secret as an ARG or ENV and bakes in no setting that is one", () => {
    const names = [
      ...dockerfile.globalArgs.keys(),
      ...dockerfile.stages.flatMap((s) =>
        [...of(s, "ARG"), ...of(s, "ENV")].flatMap((i) =>
          [...i.rest.matchAll(/(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=/g)].map((m) => m[1]!),
        ),
      ),
    ];
    assert.ok(names.length > 0);
    assert.deepEqual(
      names.filter((n) => /KEY|SECRET|PASSWORD|TOKEN|PRIVATE|XPUB|DATABASE_URL|REDIS_URL|OIDC/i.test(n)),
      [],
    );
    assert.deepEqual(
      names.filter((n) => !["NODE_IMAGE", "NODE_ENV", "PORT", "DATA_DIR"].includes(n)),
      [],
    );
  });

  it("both stages start from NODE_IMAGE, Node 24 by default", () => {
    assert.match(dockerfile.globalArgs.get("NODE_IMAGE") ?? "", /^node:24(-|$)/);
    for (const stage of dockerfile.stages) assert.match(stage.base, /^\$\{NODE_IMAGE\}$/);
  });

  it("the runtime stage runs as a non-root user, with a HEALTHCHECK on /health/ready and an exec-form CMD", () => {
    const users = of(runtime, "USER");
    assert.equal(users.length, 1);
    const user = users[0]!.rest;
    assert.ok(!/^(root|0)(:|$)/.test(user), `USER ${user}`);
    const cmd = of(runtime, "CMD");
    assert.ok(cmd.at(-1)!.line > users[0]!.line, "CMD comes after USER");
    assert.deepEqual(execForm(cmd.at(-1)!.rest), ["node", "dist/server.js"]);
    const health = of(runtime, "HEALTHCHECK");
    assert.equal(health.length, 1);
    const probe = execForm(health[0]!.rest.replace(/^(--\S+\s+)*CMD\s+/, ""));
    assert.ok(probe, "HEALTHCHECK CMD in exec form");
    assert.equal(probe[0], "node");
    assert.match(probe.join(" "), /\/health\/ready/);
    // The runtime stage's own commands only create the user and its data directory.
    for (const step of runSteps(runtime)) assert.match(step, /^(groupadd|useradd|install -d) /);
    assert.ok(
      runSteps(runtime).some((s) => s.includes(user)),
      "the user is created in the image",
    );
  });

  it("the compiled operator CLIs run from the runtime stage's files on plain Node", () => {
    const env = { PATH: process.env.PATH ?? "", NODE_ENV: "production" };
    const run = (args: string[]) =>
      spawnSync(process.execPath, ["--preserve-symlinks", ...args], {
        cwd: assembled,
        env,
        encoding: "utf8",
      });
    const paymaster = run(["dist/operator/main.js", "help"]);
    assert.equal(paymaster.status, 0, paymaster.stderr);
    assert.match(paymaster.stdout, /deploy --entry-point/);
    const secrets = run(["dist/secrets/main.js", "new-key"]);
    assert.equal(secrets.status, 0, secrets.stderr);
    assert.match(secrets.stdout.trim(), /^[A-Za-z0-9+/]{43}=$/);
    // The server's module graph: every module dist/server.js imports (it listens when imported).
    const modules = ["app", "config", "db/migrate", "process/cluster", "process/log", "process/policy"]
      .concat(["process/shutdown", "process/startup", "secrets/registry", "secrets/reseal", "services"])
      .map((m) => `await import('./dist/${m}.js');`);
    const graph = run(["--input-type=module", "-e", modules.join(" ")]);
    assert.equal(graph.status, 0, graph.stderr);
  });

  it("the compose stack commits no secret: each comes from the environment, required", () => {
    const compose = readFileSync(join(REPO_ROOT, "compose.yaml"), "utf8");
    const settings = [...compose.matchAll(/^\s+([A-Z_]+):\s*(.*)$/gm)].map((m) => [m[1]!, m[2]!] as const);
    const secretSettings = settings.filter(([name]) => /KEY|PASSWORD|SECRET|XPUB/.test(name));
    assert.ok(secretSettings.length >= 4);
    for (const [name, value] of secretSettings) assert.match(value, /^\$\{[A-Z_]+:\?/, name);
    const db = settings.find(([name]) => name === "DATABASE_URL")![1];
    assert.match(db, /:\$\{POSTGRES_PASSWORD:\?[^}]*\}@/);
  });
});
