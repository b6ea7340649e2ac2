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
import { loadOrCreateSecret } from "../secrets.ts";

/** A developer as the identity provider vouches for them. */
export interface VerifiedIdentity {
  subject: string;
  email: string;
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
  // A provider that says the address is unverified cannot be trusted to link invitations.
  if (payload.email_verified === false) return null;
  if (typeof payload.sub !== "string" || payload.sub.length === 0) return null;
  return { subject: `${issuer} ${payload.sub}`, email: email.toLowerCase() };
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
      const normalized = email.toLowerCase();
      if (!EMAIL.test(normalized)) throw new Error("not an email address");
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
