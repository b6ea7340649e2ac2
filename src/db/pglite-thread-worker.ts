/**
 * The embedded database's own thread (pglite-thread.ts starts it). It opens PGlite and answers the
 * service thread's requests: a statement, a transaction's start and its end. Statements of an open
 * transaction carry its number; any other statement queues behind it in PGlite, as it would in
 * the service's own thread.
 */
import { parentPort, workerData } from "node:worker_threads";
import { PGlite, type Transaction } from "@electric-sql/pglite";
import type { ThreadReply, ThreadRequest, ThreadStart } from "./pglite-thread.ts";

const port = parentPort!;
const start = workerData as ThreadStart;

/** Thrown inside PGlite's transaction callback to roll it back. */
const ROLLBACK = Symbol("rollback");

interface OpenTransaction {
  tx: Transaction;
  /** Ends PGlite's transaction callback: commit when true, roll back when false. */
  end(commit: boolean): void;
  /** Settles when PGlite has committed or rolled back. */
  done: Promise<void>;
}

const open = new Map<number, OpenTransaction>();

function reply(message: ThreadReply) {
  port.postMessage(message);
}

/** An error as plain fields: a DatabaseError's code, detail, constraint and the rest survive the copy. */
function plainError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const fields: Record<string, unknown> = { message: err.message, name: err.name };
  for (const [k, v] of Object.entries(err)) {
    if (v === undefined || typeof v === "function" || typeof v === "object") continue;
    fields[k] = v;
  }
  return fields;
}

async function main() {
  let pg: PGlite;
  try {
    pg = await PGlite.create(start.dataDir);
  } catch (err) {
    reply({ id: 0, error: plainError(err) });
    return;
  }
  reply({ id: 0, rows: [] });

  port.on("message", (req: ThreadRequest) => {
    switch (req.kind) {
      case "query": {
        const run = req.tx === undefined ? pg : open.get(req.tx)?.tx;
        if (!run) {
          reply({ id: req.id, error: { message: "no such transaction" } });
          return;
        }
        run.query(req.sql, req.params).then(
          (res) => reply({ id: req.id, rows: res.rows }),
          (err) => reply({ id: req.id, error: plainError(err) }),
        );
        return;
      }
      case "begin": {
        let end!: (commit: boolean) => void;
        const ended = new Promise<boolean>((resolve) => {
          end = resolve;
        });
        const entry: OpenTransaction = {
          tx: undefined as unknown as Transaction,
          end,
          done: Promise.resolve(),
        };
        let began = false;
        entry.done = pg
          .transaction(async (tx) => {
            began = true;
            entry.tx = tx;
            open.set(req.id, entry);
            reply({ id: req.id, rows: [] });
            if (!(await ended)) throw ROLLBACK;
          })
          .then(
            () => {},
            (err) => {
              if (err !== ROLLBACK) throw err;
            },
          )
          .finally(() => open.delete(req.id));
        entry.done.catch((err) => {
          if (!began) reply({ id: req.id, error: plainError(err) });
        });
        return;
      }
      case "end": {
        const t = open.get(req.tx);
        if (!t) {
          reply({ id: req.id, error: { message: "no such transaction" } });
          return;
        }
        t.end(req.commit);
        t.done.then(
          () => reply({ id: req.id, rows: [] }),
          (err) => reply({ id: req.id, error: plainError(err) }),
        );
        return;
      }
      case "close":
        pg.close().then(
          () => {
            reply({ id: req.id, rows: [] });
            port.close();
          },
          (err) => reply({ id: req.id, error: plainError(err) }),
        );
        return;
    }
  });
}

void main();
