import net from "node:net";

/**
 * HTTP/1.1 over a bare TCP socket, for tests of what `inject` cannot send: bytes that are not
 * HTTP, several requests on one connection, and what happens to the connection afterwards.
 */
export interface RawResponse {
  status: number;
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Bytes of the body as received (to compare with Content-Length). */
  bodyBytes: number;
}

type Parsed = { response: RawResponse; consumed: number } | { error: string } | null;

/** One response from the start of `buf`; null when more bytes are needed. */
export function parseResponse(buf: Buffer, closed: boolean): Parsed {
  const end = buf.indexOf("\r\n\r\n");
  if (end === -1) return buf.length > 65_536 ? { error: "response head over 64 KiB" } : null;
  const [statusLine, ...lines] = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] ([1-5][0-9]{2})(?: .*)?$/.exec(statusLine!);
  if (!m) return { error: `not a status line: ${JSON.stringify(statusLine!.slice(0, 80))}` };
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const h = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!h) return { error: `not a header line: ${JSON.stringify(line.slice(0, 80))}` };
    const name = h[1]!.toLowerCase();
    headers[name] = name in headers ? `${headers[name]}, ${h[2]}` : h[2]!;
  }
  const status = Number(m[1]);
  const start = end + 4;
  const done = (bodyEnd: number, consumed: number, body = buf.subarray(start, bodyEnd)): Parsed => ({
    response: { status, headers, body: body.toString("utf8"), bodyBytes: body.length },
    consumed,
  });
  if (status < 200 || status === 204 || status === 304) return done(start, start);
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) return parseChunked(buf, start, done);
  if (headers["content-length"] !== undefined) {
    if (!/^[0-9]+$/.test(headers["content-length"])) return { error: "bad content-length" };
    const length = Number(headers["content-length"]);
    return buf.length - start >= length ? done(start + length, start + length) : null;
  }
  // No length: the body runs to the end of the connection.
  return closed ? done(buf.length, buf.length) : null;
}

function parseChunked(
  buf: Buffer,
  start: number,
  done: (bodyEnd: number, consumed: number, body: Buffer) => Parsed,
): Parsed {
  const parts: Buffer[] = [];
  let at = start;
  for (;;) {
    const lineEnd = buf.indexOf("\r\n", at);
    if (lineEnd === -1) return null;
    const size = Number.parseInt(buf.subarray(at, lineEnd).toString("latin1").split(";")[0]!, 16);
    if (Number.isNaN(size)) return { error: "bad chunk size" };
    if (size === 0) {
      // The last chunk, then trailers (usually none) and an empty line.
      if (buf.length < lineEnd + 4) return null;
      if (buf.subarray(lineEnd + 2, lineEnd + 4).toString("latin1") === "\r\n") {
        return done(at, lineEnd + 4, Buffer.concat(parts));
      }
      const trailersEnd = buf.indexOf("\r\n\r\n", lineEnd + 2);
      return trailersEnd === -1 ? null : done(at, trailersEnd + 4, Buffer.concat(parts));
    }
    if (buf.length < lineEnd + 2 + size + 2) return null;
    parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** A client connection that reads responses as they come. */
export class RawConnection {
  readonly responses: RawResponse[] = [];
  /** Set when the bytes received are not HTTP responses. */
  malformed: string | null = null;
  closed = false;
  reset = false;
  /** The test itself hung up (a response cut short then is no fault of the server). */
  private hungUp = false;
  private buf = Buffer.alloc(0);
  private received = 0;
  private taken = 0;
  private readonly listeners = new Set<() => void>();

  private constructor(private readonly socket: net.Socket) {
    socket.on("data", (chunk) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      this.received += chunk.length;
      this.parse();
    });
    socket.on("error", () => {
      this.reset = true;
    });
    socket.on("close", () => {
      this.closed = true;
      this.parse();
      if (this.buf.length > 0 && !this.malformed && !this.reset && !this.hungUp) {
        this.malformed = `connection closed inside a response: ${JSON.stringify(this.buf.toString("latin1").slice(0, 120))}`;
      }
      this.notify();
    });
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  write(data: string | Buffer): void {
    if (!this.socket.destroyed) this.socket.write(data);
  }

  /** Waits until `n` responses arrived, the connection closed, or nothing came for `idleMs`. */
  async waitFor(n: number, idleMs = 10_000): Promise<void> {
    while (this.responses.length < n && !this.closed && !this.malformed) {
      const before = this.received;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, idleMs);
        const wake = () => {
          clearTimeout(timer);
          this.listeners.delete(wake);
          resolve();
        };
        this.listeners.add(wake);
      });
      if (this.received === before && !this.closed) return;
    }
  }

  /** The next response after those already taken, or an error saying why there is none. */
  async next(idleMs = 10_000): Promise<RawResponse> {
    const want = this.taken + 1;
    await this.waitFor(want, idleMs);
    if (this.malformed) throw new Error(this.malformed);
    const response = this.responses[this.taken];
    if (!response) throw new Error(`no response ${want} (closed: ${this.closed}, reset: ${this.reset})`);
    this.taken = want;
    return response;
  }

  /** Resolves true once the server closed the connection (false after `idleMs` without it). */
  async closedByServer(idleMs = 10_000): Promise<boolean> {
    await this.waitFor(Number.POSITIVE_INFINITY, idleMs);
    return this.closed;
  }

  destroy(): void {
    this.hungUp = true;
    this.socket.destroy();
  }

  private parse() {
    while (!this.malformed) {
      const parsed = parseResponse(this.buf, this.closed);
      if (parsed === null) break;
      if ("error" in parsed) {
        this.malformed = parsed.error;
        break;
      }
      this.responses.push(parsed.response);
      this.buf = this.buf.subarray(parsed.consumed);
    }
    this.notify();
  }

  private notify() {
    for (const wake of [...this.listeners]) wake();
  }
}

/** Sends `data` on a fresh connection and collects what comes back until the server closes it or falls silent. */
export async function exchange(
  port: number,
  data: string | Buffer,
  opts: { expect?: number; idleMs?: number } = {},
): Promise<RawConnection> {
  const conn = await RawConnection.open(port);
  conn.write(data);
  await conn.waitFor(opts.expect ?? Number.POSITIVE_INFINITY, opts.idleMs ?? 10_000);
  conn.destroy();
  return conn;
}
