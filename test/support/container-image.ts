/**
 * The container image's contents, worked out without a Docker daemon: the Dockerfile's
 * instructions, the build context that .dockerignore admits, what each COPY puts in a stage, and
 * the packages `npm ci` and `npm prune` leave, read from package-lock.json with npm's own rules.
 * test/container.test.ts checks the result; the matcher follows Docker's (moby/patternmatcher):
 * patterns anchored at the context root, `*` and `?` within one path segment, `**` across
 * segments, a pattern that matches a directory excluding everything under it, the last matching
 * line deciding, `!` re-including.
 */
import { readdirSync } from "node:fs";
import { basename, join, posix } from "node:path";

export interface Instruction {
  keyword: string;
  /** Everything after the keyword, continuation lines joined. */
  rest: string;
  line: number;
}

export interface Stage {
  base: string;
  name: string | null;
  instructions: Instruction[];
}

export interface Dockerfile {
  /** ARG instructions before the first FROM: name → default value (null when none). */
  globalArgs: Map<string, string | null>;
  stages: Stage[];
}

export function parseDockerfile(text: string): Dockerfile {
  const globalArgs = new Map<string, string | null>();
  const stages: Stage[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let logical = lines[i]!;
    if (/^\s*(#|$)/.test(logical)) continue;
    // A trailing backslash continues the instruction; comment lines inside it are dropped.
    while (/\\\s*$/.test(logical) && i + 1 < lines.length) {
      logical = logical.replace(/\\\s*$/, " ");
      i++;
      logical += /^\s*#/.test(lines[i]!) ? "\\" : lines[i]!;
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(logical);
    if (!m) throw new Error(`Dockerfile line ${start + 1}: cannot parse ${JSON.stringify(logical)}`);
    const instruction = { keyword: m[1]!.toUpperCase(), rest: m[2]!.trim(), line: start + 1 };
    if (instruction.keyword === "FROM") {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.rest);
      if (!from) throw new Error(`Dockerfile line ${start + 1}: cannot parse FROM ${instruction.rest}`);
      stages.push({ base: from[1]!, name: from[2] ?? null, instructions: [] });
    } else if (stages.length === 0) {
      if (instruction.keyword !== "ARG") throw new Error(`${instruction.keyword} before the first FROM`);
      const [name, value] = instruction.rest.split(/=(.*)/s);
      globalArgs.set(name!, value ?? null);
    } else {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return { globalArgs, stages };
}

export interface Copy {
  from: string | null;
  sources: string[];
  dest: string;
}

/** A COPY's flags, sources and destination (shell or JSON form). */
export function parseCopy(rest: string): Copy {
  let from: string | null = null;
  const words: string[] = [];
  let tail = rest;
  for (;;) {
    const flag = /^--([a-z-]+)=(\S+)\s+/.exec(tail);
    if (!flag) break;
    if (flag[1] === "from") from = flag[2]!;
    else if (flag[1] !== "chown" && flag[1] !== "chmod") throw new Error(`COPY --${flag[1]} is not modelled`);
    tail = tail.slice(flag[0].length);
  }
  if (tail.startsWith("[")) words.push(...(JSON.parse(tail) as string[]));
  else words.push(...tail.split(/\s+/));
  if (words.length < 2) throw new Error(`COPY needs a source and a destination: ${rest}`);
  if (words.some((w) => /[*?[]/.test(w))) throw new Error(`COPY with a wildcard is not modelled: ${rest}`);
  return { from, sources: words.slice(0, -1), dest: words.at(-1)! };
}

/** The exec (JSON array) form of CMD or HEALTHCHECK ... CMD, or null for the shell form. */
export function execForm(rest: string): string[] | null {
  if (!rest.startsWith("[")) return null;
  const parsed = JSON.parse(rest) as unknown;
  return Array.isArray(parsed) && parsed.every((w) => typeof w === "string") ? parsed : null;
}

/** Go's filepath.Clean for the forward-slash paths of a context, without a leading slash. */
function clean(path: string): string {
  const normal = posix.normalize(path.replace(/^\/+/, ""));
  return normal === "." ? "" : normal.replace(/\/+$/, "");
}

function segmentRegex(pattern: string): string {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      if (end < 0) throw new Error(`unterminated [ in ${pattern}`);
      out += `[${pattern.slice(i + 1, end).replace(/^!/, "^")}]`;
      i = end;
    } else if (c === "\\") out += `\\${pattern[++i] ?? "\\"}`;
    else out += c.replace(/[.+^${}()|\]\\]/g, "\\$&");
  }
  return out;
}

interface Rule {
  exclude: boolean;
  regex: RegExp;
  text: string;
}

function patternRegex(pattern: string): RegExp {
  const parts = pattern.split("/");
  let source = "";
  parts.forEach((part, i) => {
    const last = i === parts.length - 1;
    if (part === "**") source += last ? ".*" : "(?:.*/)?";
    else source += segmentRegex(part) + (last ? "" : "/");
  });
  return new RegExp(`^${source}$`);
}

/** .dockerignore as a predicate: whether the context leaves `path` (forward slashes) out. */
export function dockerignore(text: string): { excluded(path: string): boolean; rules: Rule[] } {
  const rules: Rule[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const exclude = !line.startsWith("!");
    const pattern = clean(exclude ? line : line.slice(1).trim());
    if (pattern === "") continue;
    rules.push({ exclude, regex: patternRegex(pattern), text: pattern });
  }
  function excluded(path: string): boolean {
    const p = clean(path);
    // A pattern matches the path itself or any directory above it (MatchesOrParentMatches).
    const prefixes = p.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/"));
    let out = false;
    for (const rule of rules) {
      if (prefixes.some((prefix) => rule.regex.test(prefix))) out = rule.exclude;
    }
    return out;
  }
  return { excluded, rules };
}

/**
 * Every file of the build context under `root`: what .dockerignore admits. A directory left out
 * is not entered unless a `!` rule could re-include something below it (Docker walks the same way).
 */
export function contextFiles(root: string, ignore: ReturnType<typeof dockerignore>): string[] {
  const negations = ignore.rules.filter((r) => !r.exclude);
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        const reopened = negations.some((r) => r.text.startsWith("**") || r.text.startsWith(`${path}/`));
        if (!ignore.excluded(path) || reopened) walk(path);
      } else if (!ignore.excluded(path)) {
        out.push(path);
      }
    }
  };
  walk("");
  return out.sort();
}

/**
 * What one COPY adds to a stage: `files` are the paths the source holds (absolute for a stage,
 * relative for the context). A directory source copies its contents into the destination; file
 * sources go into it by name when it ends with `/` or there are several.
 */
export function applyCopy(copy: Copy, files: readonly string[], workdir: string): Map<string, string> {
  const dest = posix.resolve(workdir, copy.dest);
  const intoDir = copy.dest.endsWith("/") || copy.sources.length > 1;
  const added = new Map<string, string>();
  for (const source of copy.sources) {
    const s = source === "." || source === "./" ? "" : source.replace(/\/+$/, "").replace(/^\.\//, "");
    const matched = files.filter((f) => s === "" || f === s || f.startsWith(`${s}/`));
    if (matched.length === 0) throw new Error(`COPY ${source}: nothing there (left out by .dockerignore?)`);
    for (const f of matched) {
      const target =
        f === s
          ? intoDir
            ? posix.join(dest, basename(f))
            : dest
          : posix.join(dest, s ? f.slice(s.length + 1) : f);
      added.set(target, f);
    }
  }
  return added;
}

export interface LockPackage {
  dev?: boolean;
  optional?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  link?: boolean;
  resolved?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  devDependencies?: Record<string, string>;
}

export type Lock = { packages: Record<string, LockPackage> };

/** The installed packages (lock keys under node_modules/) that `npm prune --omit=...` keeps. */
export function afterPrune(lock: Lock, omit: ReadonlySet<string>): Set<string> {
  const kept = new Set<string>();
  for (const [key, entry] of Object.entries(lock.packages)) {
    if (!key.startsWith("node_modules/")) continue;
    // A link (a `file:` dependency) carries no flags of its own; its target does.
    const flags = entry.link ? (lock.packages[entry.resolved!] ?? {}) : entry;
    const gone =
      (flags.peer && omit.has("peer")) ||
      (flags.dev && omit.has("dev")) ||
      (flags.optional && omit.has("optional")) ||
      (flags.devOptional && omit.has("dev") && omit.has("optional"));
    if (!gone) kept.add(key);
  }
  return kept;
}

/** Node's lookup of `name` from the package at lock key `from`: its own node_modules, then upward. */
function locate(lock: Lock, from: string, name: string): string | null {
  let at = from;
  for (;;) {
    const candidate = `${at ? `${at}/` : ""}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (at === "") return null;
    const i = at.lastIndexOf("/node_modules/");
    at = i < 0 ? "" : at.slice(0, i);
  }
}

/**
 * The packages the production code can reach, worked out from the lock's dependency edges rather
 * than from npm's flags: from the root's `dependencies`, through each package's dependencies and
 * required peers, and through optional dependencies when `optional` is set. An optional peer is
 * never followed: it is there only when something else (here, a devDependency) installs it.
 */
export function reachableFromProduction(lock: Lock, { optional }: { optional: boolean }): Set<string> {
  const seen = new Set<string>();
  const queue = [""];
  while (queue.length > 0) {
    const key = queue.shift()!;
    const link = lock.packages[key]!;
    const at = link.link ? link.resolved! : key;
    const entry = lock.packages[at]!;
    const peers = Object.keys(entry.peerDependencies ?? {}).filter(
      (n) => !entry.peerDependenciesMeta?.[n]?.optional,
    );
    const names = [
      ...Object.keys(entry.dependencies ?? {}),
      ...peers,
      ...(optional ? Object.keys(entry.optionalDependencies ?? {}) : []),
    ];
    for (const name of names) {
      const found = locate(lock, at, name);
      if (found === null) {
        if (name in (entry.optionalDependencies ?? {})) continue;
        throw new Error(`${at || "the root"} needs ${name}, which the lock does not hold`);
      }
      if (!seen.has(found)) {
        seen.add(found);
        queue.push(found);
      }
    }
  }
  return seen;
}
