import type { IncomingMessage } from "node:http";

/**
 * EIP-5792 wallets take a paymaster service as a URL, so the API key may come as `?apikey=` in
 * it. A key in a URL would end up in every log line that prints the URL, so it is cut out of the
 * URL before routing (Fastify's `rewriteUrl`, which runs before anything logs the request) and
 * kept beside the raw request for the ERC-7677 route to read. Every path gets this treatment; only
 * /rpc honours the key.
 */
const keys = new WeakMap<IncomingMessage, string>();

export function stripUrlKey(req: IncomingMessage): string {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  if (q === -1 || !/(^|[?&])api_?key=/i.test(url.slice(q))) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const name of [...params.keys()]) {
    if (/^api_?key$/i.test(name)) {
      const value = params.get(name);
      if (value && !keys.has(req)) keys.set(req, value);
      params.delete(name);
    }
  }
  const rest = params.toString();
  return rest ? `${url.slice(0, q)}?${rest}` : url.slice(0, q);
}

/** The API key that came in the request's URL, if any. */
export function urlKeyOf(req: IncomingMessage): string | undefined {
  return keys.get(req);
}
