import { randomUUID } from "node:crypto";
import {
  type CryptoKey,
  createRemoteJWKSet,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
  SignJWT,
} from "jose";
import type { OidcConfig } from "../config.ts";
import { loadOrCreateSecret } from "../secrets/key-files.ts";
import { normalizeEmail } from "./email.ts";

/** A developer as the identity provider vouches for them. */
export interface VerifiedIdentity {
  subject: string;
  /**
   * The address the provider vouches for (`email_verified: true`, the boolean), normalised by
   * `normalizeEmail`; null when the token's email is unverified, or one the service cannot
   * compare safely. Only a non-null email may claim an invitation or create a record under it.
   */
  email: string | null;
}

export interface TokenVerifier {
  verify(token: string): Promise<VerifiedIdentity | null>;
}

export const LOCAL_ISSUER = "urn:gas-sponsorship:local-issuer";
export const LOCAL_AUDIENCE = "gas-sponsorship-api";
const LOCAL_ALG = "ES256";
const OIDC_ALGS = ["RS256", "ES256"];
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}$/;

/** Verifies OIDC access tokens against the provider's JWKS (cached; unknown kids refetched ≤ every 30 s). */
export function oidcVerifier(oidc: OidcConfig): TokenVerifier {
  const jwks = createRemoteJWKSet(new URL(oidc.jwksUrl), {
    cooldownDuration: 30_000,
    cacheMaxAge: 10 * 60_000,
    timeoutDuration: 5_000,
  });
  return verifierFor(jwks, oidc.issuer, oidc.audience, OIDC_ALGS);
}

function verifierFor(
  key: JWTVerifyGetKey | CryptoKey | Uint8Array,
  issuer: string,
  audience: string,
  algorithms: string[],
): TokenVerifier {
  return {
    async verify(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, key as JWTVerifyGetKey, {
          issuer,
          audience,
          algorithms,
          requiredClaims: ["exp", "sub"],
          clockTolerance: 30,
        }));
      } catch {
        return null;
      }
      return identityFrom(payload, issuer);
    },
  };
}

function identityFrom(payload: JWTPayload, issuer: string): VerifiedIdentity | null {
  const email = payload.email;
  if (typeof email !== "string" || !EMAIL.test(email)) return null;
  // A provider that says outright that the address is unverified is refused, as it always was.
  if (payload.email_verified === false) return null;
  if (typeof payload.sub !== "string" || payload.sub.length === 0) return null;
  // Anything but the boolean true (the string "false", "true", a missing claim) vouches for
  // nothing: such a token signs in as its subject only (developers.ts decides what that means).
  const verified = payload.email_verified === true ? normalizeEmail(email) : null;
  return { subject: `${issuer} ${payload.sub}`, email: verified };
}

export interface LocalIssuer extends TokenVerifier {
  issue(email: string, ttlSec?: number): Promise<string>;
  /** Signs arbitrary claims with the local key, so tests can prove each claim check bites. */
  signForTest(claims: Record<string, unknown>): Promise<string>;
}

/**
 * Without an identity provider the service signs its own developer tokens with an ES256 key
 * kept in DATA_DIR. Meant for development and tests; refused in production by config.
 */
export async function localIssuer(dataDir: string): Promise<LocalIssuer> {
  // Generating a spare ES256 key costs a millisecond; it is kept only when none is stored yet.
  const spare = await generateKeyPair(LOCAL_ALG, { extractable: true });
  const spareJwk = JSON.stringify(await exportJWK(spare.privateKey));
  const jwk = JSON.parse(loadOrCreateSecret(dataDir, "local-issuer.jwk.json", () => spareJwk));
  const privateKey = (await importJWK(jwk, LOCAL_ALG)) as CryptoKey;
  const { d: _d, ...publicJwk } = jwk;
  const publicKey = (await importJWK(publicJwk, LOCAL_ALG)) as CryptoKey;
  const verifier = verifierFor(publicKey, LOCAL_ISSUER, LOCAL_AUDIENCE, [LOCAL_ALG]);
  return {
    verify: verifier.verify,
    async issue(email, ttlSec = 3600) {
      const normalized = normalizeEmail(email);
      if (normalized === null) throw new Error("not an email address the service accepts (ASCII only)");
      return new SignJWT({ email: normalized, email_verified: true })
        .setProtectedHeader({ alg: LOCAL_ALG, typ: "JWT" })
        .setIssuer(LOCAL_ISSUER)
        .setAudience(LOCAL_AUDIENCE)
        .setSubject(`local:${normalized}`)
        .setIssuedAt()
        .setJti(randomUUID())
        .setExpirationTime(`${ttlSec}s`)
        .sign(privateKey);
    },
    signForTest: (claims) => new SignJWT(claims).setProtectedHeader({ alg: LOCAL_ALG }).sign(privateKey),
  };
}
