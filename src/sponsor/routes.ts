import { createHash, randomBytes } from "node:crypto";
import { Type } from "@sinclair/typebox";
import { type Address, bytesToHex, type Hex } from "viem";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin, Services } from "../context.ts";
import { ApiError } from "../http/problem.ts";
import { Address as AddressSchema, bearer, responses, Selector } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { encodePaymasterAndData, PAYMASTER_DATA_OFFSET, sponsorshipDigest } from "./paymaster-data.ts";
import { MAX_ESTIMATED_GAS, quote } from "./policy.ts";

// Measured on anvil against the real EntryPoint: verification needs 46,065 gas and postOp 3,103;
// the margins keep a cold storage slot or a longer calldata from failing an operation.
export const PAYMASTER_VERIFICATION_GAS_LIMIT = 60_000n;
export const PAYMASTER_POST_OP_GAS_LIMIT = 10_000n;

export const AuthorizeBody = Type.Object(
  {
    projectId: Type.String({ minLength: 1, maxLength: 64 }),
    user: AddressSchema,
    target: AddressSchema,
    selector: Selector,
    estimatedGas: Type.Integer({
      minimum: 1,
      maximum: Number(MAX_ESTIMATED_GAS),
      description: "Gas of the whole user operation (all its limits), which the reservation prices",
    }),
    chainId: Type.Integer({ minimum: 1, maximum: 2 ** 53 - 1 }),
    clientNonce: Type.Optional(
      Type.String({
        pattern: "^[A-Za-z0-9._:-]{1,128}$",
        description: "Idempotency key, kept 24 h per project",
      }),
    ),
  },
  // Unknown fields are ignored here, so clients may send extra context without breaking.
  { additionalProperties: true },
);

const Authorized = Type.Object({
  authorized: Type.Boolean(),
  paymasterAndData: Type.String(),
  signature: Type.String(),
  validUntil: Type.Integer(),
  validAfter: Type.Integer(),
  paymaster: Type.String(),
  paymasterData: Type.String({ description: "paymasterAndData after the address and the two gas limits" }),
  paymasterVerificationGasLimit: Type.String(),
  paymasterPostOpGasLimit: Type.String(),
  maxGasCost: Type.String({ description: "Wei reserved from the gas tank; the most the chain can charge" }),
  authorizationId: Type.String(),
});

export const sponsorRoutes: RoutePlugin = async (app, { services }) => {
  const ttls = projectTtlCache(services);

  app.post(
    "/sponsor/authorize",
    {
      schema: {
        tags: ["sponsorship"],
        security: bearer,
        summary: "Authorize sponsoring one user operation and reserve its cost from the gas tank",
        body: AuthorizeBody,
        response: responses({ 200: Authorized }, [402]),
      },
    },
    async (request, reply) => {
      const principal = requirePrincipal(request);
      const body = request.body;
      if (principal.kind !== "apiKey" || principal.projectId !== body.projectId) {
        throw new ApiError(401, "unauthorized", "authorize needs an API key of this project");
      }
      await authorizeProject(services.db, request, body.projectId, "sponsor:authorize");

      const chain = services.config.chains.find((c) => c.chainId === body.chainId);
      const q = quote({
        chain,
        chainId: body.chainId,
        estimatedGas: BigInt(body.estimatedGas),
        ttlSec: await ttls.get(body.projectId),
        nowMs: services.now(),
      });
      if (q.kind === "denied") throw new ApiError(q.status, q.code, q.detail);

      const sender = body.user.toLowerCase() as Address;
      const target = body.target.toLowerCase() as Address;
      const selector = body.selector.toLowerCase() as Hex;
      const sponsorship = {
        sender,
        target,
        selector,
        maxGasCostWei: q.maxGasCostWei,
        validUntilSec: q.validUntilSec,
        validAfterSec: q.validAfterSec,
        authId: bytesToHex(randomBytes(32)),
      };
      const domain = { chainId: body.chainId, paymaster: q.paymaster };
      const signature = services.signer.signDigest(sponsorshipDigest(domain, sponsorship));
      const paymasterAndData = encodePaymasterAndData(
        domain,
        {
          verificationGasLimit: PAYMASTER_VERIFICATION_GAS_LIMIT,
          postOpGasLimit: PAYMASTER_POST_OP_GAS_LIMIT,
        },
        sponsorship,
        signature,
      );
      // Serialised by hand, in a fixed order, so that an idempotent replay is byte-identical.
      const response = JSON.stringify({
        authorized: true,
        paymasterAndData,
        signature,
        validUntil: q.validUntilSec,
        validAfter: q.validAfterSec,
        paymaster: q.paymaster,
        paymasterData: `0x${paymasterAndData.slice(2 + PAYMASTER_DATA_OFFSET * 2)}`,
        paymasterVerificationGasLimit: PAYMASTER_VERIFICATION_GAS_LIMIT.toString(),
        paymasterPostOpGasLimit: PAYMASTER_POST_OP_GAS_LIMIT.toString(),
        maxGasCost: q.maxGasCostWei.toString(),
        authorizationId: sponsorship.authId,
      });
      const nonce = body.clientNonce ?? null;
      const requestDigest = nonce
        ? digestOf(body.projectId, sender, target, selector, body.estimatedGas, body.chainId)
        : null;

      const outcome = await services.reservations.reserve({
        projectId: body.projectId,
        clientNonce: nonce,
        requestDigest,
        authId: sponsorship.authId,
        apiKeyId: principal.keyId,
        chainId: body.chainId,
        sender,
        target,
        selector,
        estimatedGas: BigInt(body.estimatedGas),
        maxGasCostWei: q.maxGasCostWei,
        validAfterSec: q.validAfterSec,
        validUntilSec: q.validUntilSec,
        response: nonce ? response : null,
      });
      switch (outcome.kind) {
        case "reserved":
          return reply.type("application/json").send(response);
        case "replay":
          if (outcome.requestDigest !== requestDigest || outcome.response === null) {
            throw new ApiError(
              422,
              "idempotency_key_reused",
              "this clientNonce was already used with a different request",
            );
          }
          return reply.type("application/json").header("idempotent-replayed", "true").send(outcome.response);
        case "not_allowlisted":
          throw new ApiError(403, "not_allowlisted", "the target contract and selector are not allowlisted");
        case "insufficient_balance":
          throw new ApiError(402, "insufficient_balance", "the gas tank cannot cover maxGasCost");
        case "daily_cap_exceeded":
          throw new ApiError(
            402,
            "daily_cap_exceeded",
            "this sponsorship would exceed the project's daily cap",
          );
      }
    },
  );
};

function digestOf(...parts: (string | number)[]): string {
  return createHash("sha256").update(parts.join("|")).digest("hex");
}

/**
 * The validity TTL of each project, cached briefly: it is read on every authorization and
 * changes rarely. A change on another instance applies within the cache lifetime.
 */
function projectTtlCache(services: Services) {
  const cache = new Map<string, { ttlSec: number; expiresAt: number }>();
  const lifetimeMs = services.config.keyCacheTtlMs;
  return {
    async get(projectId: string): Promise<number> {
      const t = services.now();
      const hit = cache.get(projectId);
      if (hit && hit.expiresAt > t) return hit.ttlSec;
      const rows = await services.db.query<{ ttl: number }>(
        "SELECT validity_ttl_sec AS ttl FROM projects WHERE id = $1",
        [projectId],
      );
      const ttlSec = rows[0]?.ttl ?? 300;
      if (cache.size > 10_000) cache.clear();
      cache.set(projectId, { ttlSec, expiresAt: t + lifetimeMs });
      return ttlSec;
    },
  };
}
