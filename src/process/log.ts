import { type Logger, pino } from "pino";

/**
 * The process's one logger: JSON lines on stdout (pino's format, which Fastify's request logs
 * share), so start-up failures, shutdown and the cluster primary read like the rest.
 *
 * Written asynchronously: while one write is on its way, the lines logged meanwhile wait in the
 * destination's buffer and go out together in the next, instead of one write system call per
 * line on the event loop (4 % of the service's CPU samples under the bench, one line per
 * request). An idle process writes each line at once. pino flushes what is buffered,
 * synchronously, when the process exits, so a line logged just before process.exit() (a start-up
 * failure, the end of a shutdown) is not lost; a process killed outright can lose the lines of
 * its last write.
 */
export function processLogger(level = "info", bindings: Record<string, unknown> = {}): Logger {
  return pino(
    {
      level,
      redact: { paths: ["req.headers.authorization", "headers.authorization"], censor: "[redacted]" },
    },
    pino.destination({ dest: 1, sync: false }),
  ).child(bindings);
}
