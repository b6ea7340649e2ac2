import { type DestinationStream, type Logger, type LoggerOptions, pino } from "pino";

/** The buffered lines' size at which they are written at once (below sonic-boom's 16 KiB maxWrite). */
export const LOG_BLOCK_BYTES = 8192;
/** The longest a logged line waits in the buffer, in ms. */
export const LOG_FLUSH_MS = 100;

/**
 * The process's one logger: JSON lines on stdout (pino's format, which Fastify's request logs
 * share), so start-up failures, shutdown and the cluster primary read like the rest.
 *
 * Written asynchronously and in blocks: lines wait in the destination's buffer until it holds
 * LOG_BLOCK_BYTES or LOG_FLUSH_MS has passed, and go out in one write system call, instead of one
 * per line on the event loop (a write per request's line was 4 % of the service's CPU samples
 * under the bench). So a line reaches stdout at most LOG_FLUSH_MS after it was logged. pino
 * flushes what is buffered, synchronously, when the process exits, but not a block an
 * asynchronous write is carrying at that moment: that block came out after the lines logged behind
 * it (CI, 2026-11-30), or could be lost with the process. So the service's own exits (a start-up
 * failure, the end of a shutdown, a lost database thread) go through exitAfterLog, which lets the
 * writes finish first. A process killed outright (SIGKILL) can lose the lines of its last
 * LOG_FLUSH_MS.
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
  destination: DestinationStream = pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_BLOCK_BYTES,
    periodicFlush: LOG_FLUSH_MS,
  }),
): Logger {
  return pino(logOptions(level), destination).child(bindings);
}

/** The longest exitAfterLog waits for the logged lines to be written (a stdout nobody reads). */
export const LOG_EXIT_DRAIN_MS = 2000;

let exiting = false;

/**
 * Ends the process with `code` once every line logged so far is written, in order: pino's flush
 * waits for a write in flight, then writes the rest. Bounded by LOG_EXIT_DRAIN_MS, after which the
 * process exits anyway (and pino's exit hook writes what is still buffered). It returns at once;
 * the exit comes from the flush's callback, so the caller calls it last, as it would process.exit.
 */
export function exitAfterLog(logger: Pick<Logger, "flush">, code: number): void {
  // The first exit decides the code: a shutdown's bound that fires while its steps still run,
  // then their own end, exit as the bound said.
  if (exiting) return;
  exiting = true;
  process.exitCode = code;
  // Whichever comes first, the flush or the bound: process.exit does not return.
  const exit = () => process.exit(code);
  setTimeout(exit, LOG_EXIT_DRAIN_MS);
  try {
    logger.flush(() => exit());
  } catch {
    exit();
  }
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
