// Signing in. With an identity provider: the authorization-code flow with PKCE from the browser
// (a public client), state and code_verifier in sessionStorage, the code taken off the address
// bar at once. Without one: the development sign-in of the local issuer (POST /auth/dev-token).
// Either way the token lives in memory and sessionStorage (this tab only), never in a URL.

const TOKEN = "gss.token";
const STATE = "gss.oidc.state";
const VERIFIER = "gss.oidc.verifier";
const RETURN_TO = "gss.oidc.return";

let token = sessionStorage.getItem(TOKEN);
const listeners = new Set();

export const currentToken = () => token;
export const onAuthChange = (fn) => listeners.add(fn);

export function setToken(value) {
  token = value;
  if (value) sessionStorage.setItem(TOKEN, value);
  else sessionStorage.removeItem(TOKEN);
}

export function signOut(reason) {
  setToken(null);
  for (const fn of listeners) fn(reason ?? null);
}

/** The claims of a JWT, for display only (the service verifies; the page never trusts them). */
export function claims() {
  try {
    const part = token.split(".")[1];
    return JSON.parse(atob(part.replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    return {};
  }
}

const redirectUri = () => `${location.origin}/dashboard`;

function base64url(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const random = (n) => base64url(crypto.getRandomValues(new Uint8Array(n)));

async function discover(issuer) {
  const url = `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
  let res;
  try {
    res = await fetch(url, { credentials: "omit", referrerPolicy: "no-referrer" });
  } catch {
    throw new Error(`the identity provider at ${issuer} could not be reached`);
  }
  if (!res.ok) throw new Error(`the identity provider's discovery document answered HTTP ${res.status}`);
  const meta = await res.json();
  if (meta.issuer !== issuer)
    throw new Error("the identity provider's discovery document names another issuer");
  return meta;
}

/** Sends the browser to the provider; it comes back to /dashboard?code=…&state=…. */
export async function startOidc(oidc) {
  const meta = await discover(oidc.issuer);
  const verifier = random(48);
  const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = random(24);
  sessionStorage.setItem(STATE, state);
  sessionStorage.setItem(VERIFIER, verifier);
  sessionStorage.setItem(RETURN_TO, location.hash || "#/orgs");
  const url = new URL(meta.authorization_endpoint);
  const params = {
    response_type: "code",
    client_id: oidc.clientId,
    redirect_uri: redirectUri(),
    scope: oidc.scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
    // Providers that issue access tokens per API (Auth0 and others) need to be told which;
    // the others ignore the parameter, as OAuth 2.0 asks them to.
    audience: oidc.audience,
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.toString());
}

/**
 * Completes a sign-in when the provider sent the browser back here. Returns false when the
 * address carries no answer from the provider.
 */
export async function completeOidc(oidc) {
  const params = new URLSearchParams(location.search);
  if (!params.has("code") && !params.has("error")) return false;
  const returnTo = sessionStorage.getItem(RETURN_TO) ?? "#/orgs";
  // Off the address bar (and out of the history) before anything else happens.
  history.replaceState(null, "", `${location.pathname}${returnTo}`);
  const expected = sessionStorage.getItem(STATE);
  const verifier = sessionStorage.getItem(VERIFIER);
  for (const key of [STATE, VERIFIER, RETURN_TO]) sessionStorage.removeItem(key);
  if (params.has("error")) {
    throw new Error(
      `the identity provider refused the sign-in: ${params.get("error")}${
        params.get("error_description") ? ` (${params.get("error_description")})` : ""
      }`,
    );
  }
  if (!oidc) throw new Error("this service has no identity provider configured for the dashboard");
  if (!expected || !verifier || params.get("state") !== expected) {
    throw new Error("the sign-in answer does not match a sign-in started in this tab; start again");
  }
  const meta = await discover(oidc.issuer);
  const res = await fetch(meta.token_endpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code"),
      redirect_uri: redirectUri(),
      client_id: oidc.clientId,
      code_verifier: verifier,
    }),
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error(
      `the identity provider refused the code: ${body.error ?? `HTTP ${res.status}`}${
        body.error_description ? ` (${body.error_description})` : ""
      }`,
    );
  }
  // The API verifies JWT access tokens for its audience; a provider whose access tokens are
  // opaque is used through its ID token (then the client id must be the API's audience).
  const isJwt = (t) => typeof t === "string" && t.split(".").length === 3;
  const chosen = isJwt(body.access_token) ? body.access_token : body.id_token;
  if (!isJwt(chosen)) throw new Error("the identity provider returned no token the API can verify");
  setToken(chosen);
  return true;
}
