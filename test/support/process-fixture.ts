import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before } from "node:test";
import { embeddedDatabaseDir } from "../../src/db/index.ts";
import { migratedTemplateFile } from "./app.ts";
import { freshDatabase } from "./fresh-database.ts";
import { ensureBuilt, type ServerProcess, startServer as startServerProcess } from "./server-process.ts";

/**
 * What the files that start the compiled server as a process share (process.test.ts,
 * process-sigterm.test.ts). Called once at the top of a file, it registers the file's hooks: the
 * build is checked first, the servers a test started are stopped after it (whatever a failed
 * test left running), and the temporary folders go with the file.
 */
export function processFixture() {
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "gss-process-"));
    dirs.push(dir);
    return dir;
  };
  const started: ServerProcess[] = [];
  const startServer = async (env: Record<string, string | undefined>): Promise<ServerProcess> => {
    const server = await startServerProcess(env);
    started.push(server);
    return server;
  };
  // A migrated embedded database copied for every server on PGlite: creating one from nothing
  // takes PGlite 5 to 20 s (initdb in WebAssembly). It is the run's migrated template (the one
  // every test store starts from), unpacked where the service keeps its database.
  let template = "";
  const dataDirWithDb = (): string => {
    const dir = tempDir();
    cpSync(template, dir, { recursive: true });
    return dir;
  };
  before(async () => {
    ensureBuilt();
    template = tempDir();
    const dbDir = embeddedDatabaseDir(template);
    mkdirSync(dbDir, { mode: 0o700 });
    execFileSync("tar", ["-xf", await migratedTemplateFile(), "-C", dbDir], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.stop(5_000)));
  });
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  return { tempDir, startServer, dataDirWithDb, freshDatabase: () => freshDatabase("gss_proc") };
}
