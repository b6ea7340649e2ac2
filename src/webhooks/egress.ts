/**
 * Where the service may send a studio's webhooks. A webhook URL is chosen by whoever administers a
 * project, and the service then makes requests to it from inside its own network: without a
 * guard, a URL such as http://10.0.0.5:5432/ or http://169.254.169.254/ turns the webhook worker
 * into a way to reach the database, Redis or the cloud's metadata service (server-side request
 * forgery). With WEBHOOK_PRIVATE_TARGETS=refuse (the default in production):
 *
 * - a URL whose host is a non-public IP literal (or `localhost`) is refused when it is saved;
 * - every connection is made to an address checked *after* DNS resolution, through the same
 *   lookup that the connection then uses (undici's `connect.lookup`), so a name that resolves to
 *   a private address — or a DNS answer that changes between a check and the connection (DNS
 *   rebinding) — never gets a connection. Redirects are never followed.
 *
 * `allow` (the default outside production) lets a laptop's receiver on 127.0.0.1 work.
 */
import { lookup as dnsLookup } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { Agent, type Dispatcher } from "undici";
import type { DeadlineSignal } from "./deadline.ts";

type DispatchController = Dispatcher.DispatchController;

export type PrivateTargets = "refuse" | "allow";

/** Not public: loopback, private, shared, link-local, documentation, benchmarking, multicast, reserved. */
const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  // Unspecified, loopback and the deprecated IPv4-compatible form (::127.0.0.1): ::/96 holds them.
  ["::", 96],
  ["::1", 128],
  // IPv4-translated (::ffff:0:10.0.0.1). IPv4-mapped ones (::ffff:0:0/96) are judged as the IPv4
  // address they carry (isPublicAddress): a BlockList rule on ::ffff:0:0/96 would match every
  // IPv4 address, since Node checks IPv4 addresses against IPv6 rules in their mapped form.
  ["::ffff:0:0:0", 96],
  // NAT64 (well-known and local-use prefixes): the gateway would connect to the embedded IPv4.
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  // IETF protocol assignments, Teredo (2001::/32) among them.
  ["2001::", 23],
  ["2001:db8::", 32],
  // 6to4: the relay would connect to the IPv4 address embedded in the next 32 bits.
  ["2002::", 16],
  ["3fff::", 20],
  ["5f00::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv6");
}

/** Whether an IP address is on the public internet (an IPv4-mapped IPv6 address is judged as IPv4). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    const mapped = mappedIpv4(address);
    if (mapped !== null) return isPublicAddress(mapped);
    return !NON_PUBLIC.check(address, "ipv6");
  }
  return !NON_PUBLIC.check(address, "ipv4");
}

/**
 * The IPv4 address an IPv4-mapped IPv6 address (::ffff:0:0/96) carries, in dotted form, however
 * the IPv6 address is written (::ffff:127.0.0.1, ::ffff:7f00:1, 0:0:0:0:0:ffff:7f00:1); else null.
 */
function mappedIpv4(address: string): string | null {
  const groups = ipv6Groups(address.toLowerCase());
  if (groups === null || groups.slice(0, 5).some((g) => g !== 0) || groups[5] !== 0xffff) return null;
  return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join(".");
}

/** The eight 16-bit groups of a valid IPv6 address (as `isIP` accepts it, zone-free). */
function ipv6Groups(address: string): number[] | null {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const part = (h: string | undefined) => (h ? h.split(":").map((g) => Number.parseInt(g, 16)) : []);
  const head = part(halves[0]);
  const tail = part(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return null;
  return [...head, ...Array(halves.length === 1 ? 0 : missing).fill(0), ...tail];
}

/** Why a URL may not be saved under this policy, or null. Names are judged when connecting. */
export function refusedTarget(url: URL, policy: PrivateTargets): string | null {
  if (policy === "allow") return null;
  // A trailing dot names the same host (localhost. is localhost).
  const host = url.hostname
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "")
    .toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost")) {
    return "the URL points at this machine (localhost); webhooks go to public addresses";
  }
  if (isIP(host) !== 0 && !isPublicAddress(host)) {
    return `the URL points at ${host}, which is not a public address; webhooks go to public addresses`;
  }
  return null;
}

export class PrivateTargetRefused extends Error {
  constructor(readonly host: string) {
    super(`${host} does not resolve to public addresses only (WEBHOOK_PRIVATE_TARGETS=refuse)`);
    this.name = "PrivateTargetRefused";
  }
}

/**
 * How a request sent with a WebhookSend failed: its deadline passed, the target was refused as
 * not public (thrown by webhookSender itself, or by its lookup),
 * or the connection failed some other way. Never the URL: it may carry a token.
 */
export type SendFailure =
  | { kind: "timeout" }
  | { kind: "refused"; message: string }
  | { kind: "network"; code?: string };

/** DNS answers that mean "this name has no address" (or none the resolver could find). */
const NAME_FAILURES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_NODATA", "EAI_NONAME", "EAI_FAIL", "ENODATA"]);

/**
 * What a studio is told when a request could not reach a public address: the same words whether
 * the name does not resolve or resolves to a private address, so that a tenant cannot use its
 * webhook's delivery log to learn which internal host names exist.
 */
export const NO_PUBLIC_ADDRESS =
  "the host has no public address to connect to (it does not resolve, or not only to public addresses)";

/** Whether a failure is one that NO_PUBLIC_ADDRESS describes. */
export function noPublicAddress(failure: SendFailure): boolean {
  return failure.kind === "refused" || (failure.kind === "network" && NAME_FAILURES.has(failure.code ?? ""));
}

/** The webhook worker's and the approval gate's one reading of a failed request. */
export function sendFailure(err: unknown): SendFailure {
  const e = err as {
    name?: string;
    message?: string;
    code?: string;
    cause?: { code?: string; name?: string; message?: string };
  };
  if (e.name === "TimeoutError" || e.name === "AbortError") return { kind: "timeout" };
  if (e.name === "PrivateTargetRefused") return { kind: "refused", message: e.message ?? "" };
  if (e.cause?.name === "PrivateTargetRefused") return { kind: "refused", message: e.cause.message ?? "" };
  // undici's request API throws the socket's error itself (its `code` on the error); fetch wraps
  // it as the cause of a TypeError.
  const code = e.cause?.code ?? e.code;
  return code ? { kind: "network", code } : { kind: "network" };
}

/**
 * What a webhook request carries: a signed JSON POST under a deadline (deadline.ts's signal, or
 * any AbortSignal), and how much of the answer's body to read.
 */
export interface WebhookRequest {
  headers: Record<string, string>;
  body: string;
  signal: AbortSignal | DeadlineSignal;
  /**
   * Keep the answer's body as text, up to this many bytes (the approval gate). Without it the body
   * is read and dropped (event deliveries), up to DROPPED_ANSWER_BYTES.
   */
  keepAnswerUpTo?: number;
}

/** The receiver's answer. */
export interface WebhookAnswer {
  status: number;
  /**
   * The body as UTF-8 text when the request kept it; null when it did not, or when the body was
   * longer than it allowed (the connection is then closed instead of read on).
   */
  text: string | null;
}

/** How the webhook worker and the approval gate send: one POST, redirects never followed. */
export type WebhookSend = (url: string, req: WebhookRequest) => Promise<WebhookAnswer>;

/**
 * How much of an answer nobody reads is read away to keep its connection (as undici's `dump()`
 * does); past it, the connection is closed instead. The status has decided by then.
 */
export const DROPPED_ANSWER_BYTES = 128 * 1024;

/** A webhook URL as a request takes it; `refusedHost` when its host is a refused IP literal. */
interface Target {
  origin: string;
  path: string;
  refusedHost: string | null;
}

/** How many URLs one sender keeps parsed; past it, it starts again from none. */
const MAX_TARGETS_PARSED = 10_000;

/**
 * dns.lookup for connections under `refuse`: every address the name resolves to must be allowed
 * (a name with one public and one private address could otherwise be steered to the private one).
 */
export function guardedLookup(allowed: (address: string) => boolean = isPublicAddress): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 4);
      if (addresses.length === 0 || !addresses.every((a) => allowed(a.address))) {
        return callback(new PrivateTargetRefused(hostname), "", 4);
      }
      if (options.all) return callback(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * The sender, through undici's `dispatch` on an Agent of its own: the request goes out and the
 * answer comes back through a handler of callbacks, with no Readable stream for the body and no
 * promise per step. undici's `request` cost a third more CPU per exchange (33 against 23-26 us
 * against the bench receiver), and WHATWG fetch ten times as much. Redirects are not followed
 * (`dispatch` follows none), so a 3xx is the receiver's answer.
 *
 * @param allowed which addresses count as public (tests widen it to reach a local receiver
 *   through the same guarded path).
 */
export function webhookSender(
  policy: PrivateTargets,
  allowed: (address: string) => boolean = isPublicAddress,
): WebhookSend {
  const agent = policy === "allow" ? new Agent() : new Agent({ connect: { lookup: guardedLookup(allowed) } });
  // What each URL is to a request, parsed once: an approval webhook sends to the same URL on
  // every authorization of its project.
  const targets = new Map<string, Target>();
  const targetOf = (url: string): Target => {
    let target = targets.get(url);
    if (!target) {
      const parsed = new URL(url);
      let refusedHost: string | null = null;
      if (policy === "refuse") {
        const host = parsed.hostname.replace(/^\[|\]$/g, "");
        // An IP literal is connected to without a lookup: it is judged here instead.
        const literalRefused = isIP(host) !== 0 ? !allowed(host) : refusedTarget(parsed, policy) !== null;
        if (literalRefused) refusedHost = parsed.hostname;
      }
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, refusedHost };
      if (targets.size >= MAX_TARGETS_PARSED) targets.clear();
      targets.set(url, target);
    }
    return target;
  };
  return (url, req) =>
    new Promise<WebhookAnswer>((resolve, reject) => {
      const target = targetOf(url);
      if (target.refusedHost !== null) throw new PrivateTargetRefused(target.refusedHost);
      const { signal } = req;
      // An aborted request is not sent; one aborted on the way fails with the signal's reason.
      if (signal.aborted) throw signal.reason;
      const keep = req.keepAnswerUpTo;
      const limit = keep ?? DROPPED_ANSWER_BYTES;
      let controller: DispatchController | null = null;
      let settled = false;
      let status = 0;
      let size = 0;
      let chunks: Buffer[] = [];
      // A dropped body that breaks off after the status (an error, the deadline, a stop) still
      // answered with that status, as when the body was read away after the answer was handed on.
      const fail = (err: unknown) =>
        finish(() => (keep === undefined && status !== 0 ? resolve({ status, text: null }) : reject(err)));
      const onAbort = () => {
        fail(signal.reason);
        controller?.abort(signal.reason);
      };
      const finish = (then: () => void) => {
        if (settled) return;
        settled = true;
        unlisten(signal, onAbort);
        then();
      };
      listen(signal, onAbort);
      // undici reports what it will not send (a header it will not write, say) to the handler too.
      agent.dispatch(
        { origin: target.origin, path: target.path, method: "POST", headers: req.headers, body: req.body },
        {
          onRequestStart(c) {
            controller = c;
            if (settled) c.abort(signal.reason);
          },
          onResponseStart(_c, statusCode) {
            // Informational answers (1xx) come before the real one.
            if (statusCode < 200) return;
            status = statusCode;
            size = 0;
            chunks = [];
          },
          onResponseData(c, chunk) {
            size += chunk.byteLength;
            if (size > limit) {
              // Past what is read: a kept body is no answer; a dropped one has its status.
              finish(() => resolve({ status, text: null }));
              c.abort(new Error("the answer is longer than the service reads"));
            } else if (keep !== undefined) chunks.push(chunk);
          },
          onResponseEnd() {
            finish(() =>
              resolve({
                status,
                text: keep === undefined ? null : Buffer.concat(chunks, size).toString("utf8"),
              }),
            );
          },
          onResponseError(_c, err) {
            fail(err);
          },
        },
      );
    });
}

function listen(signal: AbortSignal | DeadlineSignal, onAbort: () => void): void {
  if ("addEventListener" in signal) signal.addEventListener("abort", onAbort, { once: true });
  else signal.once("abort", onAbort);
}

function unlisten(signal: AbortSignal | DeadlineSignal, onAbort: () => void): void {
  if ("removeEventListener" in signal) signal.removeEventListener("abort", onAbort);
  else signal.removeListener("abort", onAbort);
}
