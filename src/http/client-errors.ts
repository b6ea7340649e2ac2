import { randomUUID } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import type { ErrorCode } from "./catalogue.ts";
import { PROBLEM_CONTENT_TYPE, problemBody } from "./problem.ts";

/**
 * Errors below Fastify: bytes Node's HTTP parser cannot read as a request, and the few requests
 * Node would otherwise answer itself with a bare status line (CONNECT, unknown `Expect`). No
 * Fastify reply exists for these, so the response is written by hand on the socket: a complete
 * HTTP/1.1 problem+json response that says `Connection: close`, since the parser cannot go on
 * after an error and a client must not reuse the connection.
 */

/** How long a refused connection keeps reading (and discarding) before it is destroyed. */
const LINGER_MS = 2000;

// llhttp reports an error again for every chunk that arrives after the first one.
const answered = new WeakSet<Duplex>();

const PARSER_DETAILS: Record<string, string> = {
  HPE_INVALID_METHOD: "the request method is not an HTTP method",
  HPE_INVALID_URL: "the request target is not a valid URL",
  HPE_INVALID_VERSION: "the HTTP version is not one the service speaks",
  HPE_INVALID_CONSTANT: "the request line is malformed",
  HPE_INVALID_HEADER_TOKEN: "a header holds a character HTTP does not allow",
  HPE_INVALID_CONTENT_LENGTH: "the Content-Length header is not a valid length",
  HPE_UNEXPECTED_CONTENT_LENGTH: "Content-Length and Transfer-Encoding were both sent",
  HPE_INVALID_TRANSFER_ENCODING: "the Transfer-Encoding header is not one the service accepts",
  HPE_INVALID_CHUNK_SIZE: "a chunk of the chunked body is malformed",
  HPE_STRICT: "the request is not well-formed HTTP/1.1",
  HPE_LF_EXPECTED: "a line of the request does not end with CRLF",
  HPE_CR_EXPECTED: "a line of the request does not end with CRLF",
};

/** The problem a parser or connection error calls for, or null when nothing can be answered. */
export function clientErrorProblem(
  errorCode: string | undefined,
): { code: ErrorCode; detail: string } | null {
  if (errorCode === "HPE_HEADER_OVERFLOW") {
    return { code: "headers_too_large", detail: "the request line and headers are over the size limit" };
  }
  if (errorCode === "ERR_HTTP_REQUEST_TIMEOUT") {
    return { code: "request_timeout", detail: "the request did not arrive in time" };
  }
  if (errorCode?.startsWith("HPE_")) {
    const detail = PARSER_DETAILS[errorCode] ?? "the HTTP request could not be parsed";
    return { code: "malformed_request", detail };
  }
  return null;
}

/** A whole HTTP/1.1 response carrying a problem, for a socket no Fastify reply owns. */
export function rawProblemResponse(
  code: ErrorCode,
  detail: string,
  requestId: string,
  headers: Record<string, string> = {},
): string {
  const problem = problemBody(code, detail, requestId);
  const body = JSON.stringify(problem);
  const lines = [
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}`,
    `content-type: ${PROBLEM_CONTENT_TYPE}; charset=utf-8`,
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${requestId}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    `date: ${new Date().toUTCString()}`,
    "connection: close",
  ];
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

/**
 * Fastify's `clientErrorHandler`: answers a request Node could not parse. Responses to the
 * requests parsed before it on the same connection (pipelining) go out first, so that each
 * client request still gets its own answer in order; the refusal is written only if the socket
 * is writable and no response is half-written on it.
 */
export function clientErrorHandler(this: { log: FastifyBaseLogger }, err: Error, socket: Duplex): void {
  if (answered.has(socket)) return;
  answered.add(socket);
  const problem = clientErrorProblem((err as NodeJS.ErrnoException).code);
  if (!problem || socket.destroyed) {
    socket.destroy();
    return;
  }
  const requestId = randomUUID();
  // Only the parser's verdict is logged: the raw bytes (err.rawPacket) may hold credentials.
  this.log.debug(
    { requestId, parserError: (err as NodeJS.ErrnoException).code },
    "malformed request refused",
  );
  afterResponsesInFlight(socket, () => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    closeWith(socket, rawProblemResponse(problem.code, problem.detail, requestId));
  });
}

/**
 * Node's own answers that are not problem+json: CONNECT (which it would drop without a word)
 * and an `Expect` other than 100-continue (a bare 417). The service tunnels nothing, and an
 * expectation it does not know is ignored, as RFC 9110 §10.1.1 allows.
 */
export function installServerEvents(server: Server, log: FastifyBaseLogger): void {
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    const requestId = randomUUID();
    log.debug({ requestId }, "CONNECT refused");
    answered.add(socket);
    const detail = "the service is not a proxy: CONNECT is not allowed";
    closeWith(socket, rawProblemResponse("method_not_allowed", detail, requestId));
    // Node has handed the socket over without a reader: drain it so that closing does not reset.
    socket.resume();
  });
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    server.emit("request", req, res);
  });
}

/** Runs `then` once no response is being written on the socket (pipelined requests' answers). */
function afterResponsesInFlight(socket: Duplex, then: () => void): void {
  // Node keeps the response that owns the socket here until its 'finish' event, when the next
  // pipelined one takes its place. (writableFinished can be true before that event, with the
  // next response still queued, so only the event is trusted.)
  const res = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!res) {
    then();
    return;
  }
  if (!res.req.complete) {
    // The broken bytes belong to this very request (its body): answer for it unless its own
    // response has started, in which case nothing can be added without corrupting it.
    if (res.headersSent) socket.destroy();
    else then();
    return;
  }
  let waited = false;
  const next = () => {
    if (waited) return;
    waited = true;
    afterResponsesInFlight(socket, then);
  };
  res.once("finish", next);
  res.once("close", next);
}

/**
 * Writes the last response and closes the connection, reading (and dropping) what the client
 * still sends for a moment: closing with unread data would reset the connection, and a reset can
 * destroy the response before the client reads it.
 */
function closeWith(socket: Duplex, response: string): void {
  socket.end(response);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}
