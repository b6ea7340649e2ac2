import type { IncomingMessage } from "node:http";
import { KEY_PREFIX } from "../api-keys/format.ts";

/**
 * EIP-5792 wallets take a paymaster service as a URL, so the API key may come as `?apikey=` in
 * it. A key in a URL would end up in every log line that prints the URL, so it is cut out of the
 * URL before routing (Fastify's `rewriteUrl`, which runs before anything logs the request) and
 * kept beside the raw request for the authentication hook (authenticate.ts). Every path gets this
 * treatment; only a route that allows it (/rpc) honours the key.
 *
 * The URL is judged as a server would read it, not as it was typed: names and values are
 * percent-decoded first (`?api%6Bey=`, `?%61pikey=`), `;` separates parameters as well as `&`
 * (some proxies and frameworks split on it), and any parameter or path segment that carries
 * something shaped like a key, under whatever name, is cut out too.
 */
const keys = new WeakMap<IncomingMessage, string>();

/** Text that looks like one of our keys (the prefix and enough of a body to be one). */
const KEY_LIKE = new RegExp(`${KEY_PREFIX}[0-9A-Za-z]{8}`);
const KEY_NAME = /^api_?key$/i;
/** What a URL with nothing to cut never contains: then it is returned as it came, at no cost. */
const MAYBE = new RegExp(`%|api_?key|${KEY_PREFIX}`, "i");

export function stripUrlKey(req: IncomingMessage): string {
  const url = req.url ?? "/";
  if (!MAYBE.test(url)) return url;
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const safePath = path
    .split("/")
    .map((segment) => (KEY_LIKE.test(decoded(segment)) ? "redacted" : segment))
    .join("/");
  if (q === -1) return safePath;
  const kept: string[] = [];
  for (const group of url.slice(q + 1).split("&")) {
    // `a=1;apikey=…`: the whole group is one parameter to an `&` parser, several to a `;` one.
    const pieces = group.split(";");
    for (const [i, piece] of pieces.entries()) {
      const eq = piece.indexOf("=");
      const name = decoded(eq === -1 ? piece : piece.slice(0, eq));
      const value = eq === -1 ? "" : decoded(piece.slice(eq + 1));
      if (KEY_NAME.test(name)) {
        // Only a parameter of its own (`&`-separated) is honoured on /rpc.
        if (i === 0 && pieces.length === 1 && value && !keys.has(req)) keys.set(req, value);
        continue;
      }
      if (KEY_LIKE.test(name) || KEY_LIKE.test(value)) continue;
      if (piece !== "") kept.push(piece);
    }
  }
  return kept.length > 0 ? `${safePath}?${kept.join("&")}` : safePath;
}

/** A URL component percent-decoded (`+` as a space), or as it is when it does not decode. */
function decoded(text: string): string {
  if (!text.includes("%") && !text.includes("+")) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}

/** The API key that came in the request's URL, if any. */
export function urlKeyOf(req: IncomingMessage): string | undefined {
  return keys.get(req);
}
