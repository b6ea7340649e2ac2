import { type Logger, pino } from "pino";

/**
 * The process's one logger: JSON lines on stdout (pino's format, which Fastify's request logs
 * share), so start-up failures, shutdown and the cluster primary read like the rest. Synchronous
 * writes: a line logged just before process.exit() is never lost.
 */
export function processLogger(level = "info", bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    redact: { paths: ["req.headers.authorization", "headers.authorization"], censor: "[redacted]" },
  }).child(bindings);
}
