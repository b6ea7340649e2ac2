/**
 * The URLs a project may point webhooks at: absolute http(s), no credentials in them, a host, a
 * bounded length. A value or a reason, for the routes to turn into a 400.
 */
export const MAX_URL_LENGTH = 2048;

export function checkWebhookUrl(value: string): { ok: true; url: string } | { ok: false; reason: string } {
  if (value.length > MAX_URL_LENGTH) return { ok: false, reason: `the URL is longer than ${MAX_URL_LENGTH}` };
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return { ok: false, reason: "the URL is not an absolute URL" };
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    return { ok: false, reason: "the URL must use https or http" };
  }
  if (parsed.username || parsed.password) {
    return { ok: false, reason: "the URL must not carry credentials; verify the signature instead" };
  }
  if (!parsed.hostname) return { ok: false, reason: "the URL has no host" };
  if (parsed.hash) return { ok: false, reason: "the URL must not have a fragment" };
  return { ok: true, url: parsed.toString() };
}
