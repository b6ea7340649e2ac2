import { type DestinationStream, type Logger, type LoggerOptions, pino } from "pino";

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
 *
 * Credentials stay out of the lines through two serializers rather than pino's `redact` paths:
 * `req` is always the request's summary (never its headers) and `headers` has its Authorization
 * value replaced, whatever its letter case. pino's redaction parsed its paths again and copied the
 * value on every line that had a `req`, every request's completion line, whose summary had no
 * headers to censor: formatting that line took 2.7 µs with it and 2.2 µs without (a loop of such
 * lines through a child made as Fastify makes one, medians of eight rounds; issue 22).
 */
export function processLogger(
  level = "info",
  bindings: Record<string, unknown> = {},
  destination: DestinationStream = pino.destination({ dest: 1, sync: false }),
): Logger {
  return pino(logOptions(level), destination).child(bindings);
}

/** The logger's options: its level and the serializers below (the tests' loggers use them too). */
export function logOptions(level: string): LoggerOptions {
  return { level, serializers: { req: loggedRequest, headers: loggedHeaders } };
}

/** What a logged Authorization header reads. */
export const CENSORED = "[redacted]";

/**
 * A request as a line shows it: the method, the URL (API keys already cut out of it by the app's
 * rewriteUrl), the accept-version header, the host, the client's address and port; never the
 * headers, which carry tokens and API keys. The fields of Fastify's own request lines, for a
 * Fastify request (its `host` and `ip`) and a bare IncomingMessage alike.
 */
export function loggedRequest(req: unknown): unknown {
  if (!req || typeof req !== "object") return req;
  const r = req as {
    method?: unknown;
    url?: unknown;
    headers?: Record<string, unknown>;
    host?: unknown;
    ip?: unknown;
    socket?: { remoteAddress?: unknown; remotePort?: unknown } | null;
  };
  return {
    method: r.method,
    url: r.url,
    version: r.headers?.["accept-version"],
    host: r.host ?? r.headers?.host,
    remoteAddress: r.ip ?? r.socket?.remoteAddress,
    remotePort: r.socket?.remotePort,
  };
}

/** Headers as a line shows them: an Authorization header's value (any letter case) censored. */
export function loggedHeaders(headers: unknown): unknown {
  if (!headers || typeof headers !== "object" || Array.isArray(headers)) return headers;
  let censored: Record<string, unknown> | null = null;
  for (const name of Object.keys(headers)) {
    if (name.toLowerCase() !== "authorization") continue;
    censored ??= { ...(headers as Record<string, unknown>) };
    censored[name] = CENSORED;
  }
  return censored ?? headers;
}
