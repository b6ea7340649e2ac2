import { type Static, Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import type { Hex } from "viem";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin, Services } from "../context.ts";
import { ApiError } from "../http/problem.ts";
import { Address as AddressSchema, bearer, responses, Selector, Wei } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { captureRefusals } from "../refusals/capture.ts";
import { type AuthorizeRequest, authorize } from "./authorize.ts";
import { checkAuthorization } from "./check.ts";
import { sponsorDeps } from "./deps.ts";
import { MAX_ESTIMATED_GAS } from "./policy.ts";

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
    initCode: Type.Optional(
      Type.String({
        pattern: "^0x(?:[0-9a-fA-F]{2}){0,24576}$",
        maxLength: 2 + 2 * 24_576,
        description:
          "factory ‖ factoryData when the operation deploys the sender (its first operation); absent or 0x when the sender is deployed. The authorization binds it.",
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
  maxTotalGas: Type.String({
    description:
      "Ceiling on the operation's total gas: verification + call + preVerification + the paymaster's two limits (= estimatedGas)",
  }),
  maxFeePerGas: Type.String({ description: "Ceiling on the operation's maxFeePerGas, wei" }),
  maxPriorityFeePerGas: Type.String({ description: "Ceiling on the operation's maxPriorityFeePerGas, wei" }),
  maxPreVerificationGas: Type.String({
    description:
      "Ceiling on the operation's preVerificationGas (derived from the operation's size; see the README): set preVerificationGas to at most this",
  }),
  senderCodeHash: Type.String({
    description:
      "The sender's EXTCODEHASH the paymaster requires when the operation runs; 32 zero bytes when no code is bound (a counterfactual sender, whose initCode is bound instead, or an unknown account on a caps_only project)",
  }),
});

export const sponsorRoutes: RoutePlugin = async (app, { services }) => {
  // Refusals of these routes (and of the dry run's own refusals: 429, a key without the scope)
  // are recorded for the project's refusal log; granted requests pass the hook at its first line.
  captureRefusals(app, services.refusals, services.now);
  await app.register(checkRoute, { services });
  const deps = sponsorDeps(services);

  app.post(
    "/sponsor/authorize",
    {
      schema: {
        tags: ["sponsorship"],
        security: bearer,
        summary: "Authorize sponsoring one user operation and reserve its cost from the gas tank",
        body: AuthorizeBody,
        response: responses({ 200: Authorized }),
      },
    },
    async (request, reply) => {
      const req = await authorizeRequest(services, request, request.body, "authorize");
      const outcome = await authorize(deps, req);
      if (outcome.kind === "refused") {
        const extensions = outcome.ruleId === undefined ? {} : { ruleId: outcome.ruleId };
        throw new ApiError(outcome.code, outcome.detail, {}, extensions);
      }
      if (outcome.replayed) reply.header("idempotent-replayed", "true");
      return reply.type("application/json").send(outcome.body);
    },
  );
};

const CheckResult = Type.Object({
  wouldSponsor: Type.Boolean({ description: "True when authorize would grant this request now" }),
  maxGasCost: Type.Union([Wei, Type.Null()], { description: "What authorize would reserve, wei" }),
  code: Type.Union([Type.String(), Type.Null()], {
    description: "The stable error code authorize would answer with (as in its problem+json)",
  }),
  ruleId: Type.Union([Type.String(), Type.Null()], { description: "The policy rule that would refuse it" }),
  detail: Type.Union([Type.String(), Type.Null()]),
});

/**
 * `POST /sponsor/check`: the dry run. The same body and key as authorize; the same rules on the
 * same data (sponsor/check.ts); nothing is signed, reserved or counted.
 */
const checkRoute: RoutePlugin = async (app, { services }) => {
  const deps = sponsorDeps(services);
  app.post(
    "/sponsor/check",
    {
      schema: {
        tags: ["sponsorship"],
        security: bearer,
        body: AuthorizeBody,
        response: responses({ 200: CheckResult }),
      },
    },
    async (request) => {
      const req = await authorizeRequest(services, request, request.body, "check");
      const outcome = await checkAuthorization(deps, { ...req, clientNonce: null });
      return outcome.kind === "would_sponsor"
        ? {
            wouldSponsor: true,
            maxGasCost: outcome.maxGasCostWei.toString(),
            code: null,
            ruleId: null,
            detail: null,
          }
        : {
            wouldSponsor: false,
            maxGasCost: null,
            code: outcome.code,
            ruleId: outcome.ruleId,
            detail: outcome.detail,
          };
    },
  );
};

/**
 * The caller must be an API key of the project named in the body (with `sponsor:authorize`);
 * the body becomes the use case's request.
 */
async function authorizeRequest(
  services: Services,
  request: FastifyRequest,
  body: Static<typeof AuthorizeBody>,
  verb: "authorize" | "check",
): Promise<AuthorizeRequest> {
  const principal = requirePrincipal(request);
  if (principal.kind !== "apiKey" || principal.projectId !== body.projectId) {
    throw new ApiError("unauthorized", `${verb} needs an API key of this project`);
  }
  await authorizeProject(services.db, request, body.projectId, "sponsor:authorize");
  return {
    projectId: body.projectId,
    apiKeyId: principal.keyId,
    user: body.user,
    target: body.target,
    selector: body.selector,
    estimatedGas: BigInt(body.estimatedGas),
    chainId: body.chainId,
    clientNonce: body.clientNonce ?? null,
    initCode: (body.initCode?.toLowerCase() ?? "0x") as Hex,
  };
}
