/**
 * Embedded PGlite on a thread of its own. In the service's thread, PGlite's WebAssembly ran every
 * statement on the event loop that also parses, signs and answers requests (about 40 % of that
 * thread's CPU under `npm run bench`); here it runs beside it, as PostgreSQL's own processes do,
 * and the service thread only posts the statements and reads back their rows.
 *
 * The semantics are openPglite's: one connection, one transaction at a time, statements outside
 * it queued behind it. Errors come back with their fields (a DatabaseError's code, constraint,
 * detail), so callers that test `code` see what they saw in process; a closed or failed thread is
 * reported as DatabaseUnavailable ("closed").
 */
import { Worker } from "node:worker_threads";
import type { Db, Queryable } from "./db.ts";
import { asUnavailable, DatabaseUnavailable } from "./unavailable.ts";

/** What the thread is started with. */
export interface ThreadStart {
  dataDir: string;
}

export type ThreadRequest =
  | { kind: "query"; id: number; sql: string; params?: unknown[]; tx?: number }
  | { kind: "begin"; id: number }
  | { kind: "end"; id: number; tx: number; commit: boolean }
  | { kind: "close"; id: number };

export type ThreadReply =
  | { id: number; rows: unknown[]; error?: undefined }
  | { id: number; error: Record<string, unknown>; rows?: undefined };

/** The worker's file beside this one: `.ts` under tsx and the tests, `.js` in dist/. */
function workerUrl(): URL {
  const ext = import.meta.url.endsWith(".ts") ? ".ts" : ".js";
  return new URL(`./pglite-thread-worker${ext}`, import.meta.url);
}

/** A DatabaseError-like Error from the fields the thread sent. */
function errorFrom(fields: Record<string, unknown>): Error {
  const err = new Error(String(fields.message ?? "embedded database error"));
  for (const [k, v] of Object.entries(fields)) {
    if (k !== "message" && k !== "stack") (err as unknown as Record<string, unknown>)[k] = v;
  }
  return err;
}

export interface ThreadOptions {
  /**
   * Called once if the thread stops without being closed (a WebAssembly abort, say). Every
   * statement then fails as DatabaseUnavailable; the server exits, as it would have had PGlite
   * failed in its own thread.
   */
  onLost?(err: Error): void;
}

/** The thread behind a Db this module opened (for tests that need to lose it). */
const threads = new WeakMap<Db, Worker>();

export function pgliteThreadOf(db: Db): Worker | undefined {
  return threads.get(db);
}

export async function openPgliteThread(dataDir: string, options: ThreadOptions = {}): Promise<Db> {
  const url = workerUrl();
  // A TypeScript source (tsx, the tests) registers tsx's loader in the thread first.
  const typescript = url.pathname.endsWith(".ts");
  const worker = new Worker(
    typescript
      ? `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); })`
      : url,
    {
      eval: typescript,
      workerData: { dataDir } satisfies ThreadStart,
    },
  );
  /** Requests posted and not yet answered, by id; id 0 is the thread's start. */
  const pending = new Map<number, { resolve(rows: unknown[]): void; reject(err: unknown): void }>();
  let nextId = 1;
  /** Set once the thread is gone: every request from then on fails with it. */
  let failure: DatabaseUnavailable | null = null;
  /** Whether losing the thread is news: after start-up, before close(). */
  let serving = false;

  const started = new Promise<void>((resolve, reject) => {
    pending.set(0, { resolve: () => resolve(), reject });
  });
  worker.on("message", (msg: ThreadReply) => {
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(asUnavailable(errorFrom(msg.error)));
    else p.resolve(msg.rows);
  });
  const gone = (err: Error) => {
    if (failure) return;
    failure = new DatabaseUnavailable("closed", { cause: err });
    for (const p of pending.values()) p.reject(failure);
    pending.clear();
    if (serving) {
      serving = false;
      options.onLost?.(err);
    }
  };
  worker.on("error", gone);
  worker.on("exit", (code) => gone(new Error(`the embedded database's thread exited (code ${code})`)));

  const send = (req: ThreadRequest): Promise<unknown[]> => {
    if (failure) return Promise.reject(failure);
    return new Promise((resolve, reject) => {
      pending.set(req.id, { resolve, reject });
      worker.postMessage(req);
    });
  };
  const queryIn =
    (tx: number | undefined) =>
    async <T>(sql: string, params?: unknown[]): Promise<T[]> =>
      (await send({
        kind: "query",
        id: nextId++,
        sql,
        ...(params ? { params } : {}),
        ...(tx === undefined ? {} : { tx }),
      })) as T[];

  try {
    await started;
  } catch (err) {
    await worker.terminate();
    throw err;
  }
  serving = true;

  let closing: Promise<void> | null = null;
  const db: Db = {
    kind: "pglite",
    query: queryIn(undefined),
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const tx = nextId++;
      await send({ kind: "begin", id: tx });
      let result: T;
      try {
        result = await fn({ query: queryIn(tx) });
      } catch (err) {
        // Rolled back; a thread already gone has nothing to roll back, and `err` is the story.
        await send({ kind: "end", id: nextId++, tx, commit: false }).catch(() => {});
        throw err;
      }
      await send({ kind: "end", id: nextId++, tx, commit: true });
      return result;
    },
    close() {
      closing ??= (async () => {
        serving = false;
        if (!failure) await send({ kind: "close", id: nextId++ }).catch(() => {});
        await worker.terminate();
      })();
      return closing;
    },
  };
  threads.set(db, worker);
  return db;
}
