// The public API, as any script calls it: `Authorization: Bearer <developer token>`, JSON in and
// out, problem+json on failure. The dashboard has no other way in.
import { currentToken, setToken, signOut } from "./auth.js";

export class ApiProblem extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export async function api(method, path, body) {
  const headers = { accept: "application/json, application/problem+json" };
  const token = currentToken();
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
  } catch {
    throw new ApiProblem(0, {
      title: "Network error",
      detail: "the service could not be reached; check the connection and try again",
    });
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const problem =
      json && typeof json === "object" ? json : { title: res.statusText, detail: `HTTP ${res.status}` };
    // An expired or revoked token: back to the sign-in page, with the reason.
    if (res.status === 401 && token) signOut(`Your session has ended: ${problem.detail ?? "sign in again"}`);
    throw new ApiProblem(res.status, problem);
  }
  return json;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body ?? {});

/** The local issuer's development sign-in (here, not in auth.js, which api.js depends on). */
export async function devSignIn(email) {
  const res = await post("/auth/dev-token", { email });
  setToken(res.token);
}
export const patch = (path, body) => api("PATCH", path, body);
export const del = (path, body) => api("DELETE", path, body);

/** Path segment encoding for ids that come from people. */
export const seg = (value) => encodeURIComponent(String(value));
