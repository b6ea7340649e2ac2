import { randomBytes } from "node:crypto";
import Fastify from "fastify";
import { type Address, bytesToHex, type Hex } from "viem";
import { validatorCompiler } from "../src/http/validation.ts";
import { encodePaymasterAndData, sponsorshipDigest } from "../src/sponsor/paymaster-data.ts";
import {
  AuthorizeBody,
  PAYMASTER_POST_OP_GAS_LIMIT,
  PAYMASTER_VERIFICATION_GAS_LIMIT,
} from "../src/sponsor/routes.ts";
import { createSigner } from "../src/sponsor/signer.ts";

/**
 * The floor: the least an authorize endpoint can do on this framework. The same Fastify, the
 * same body validator and schema, one EIP-712 digest and one signature per request, and no
 * storage, no authentication, no rate limit, no logging. authorize ÷ floor says how much of
 * the achievable rate the service keeps after doing its real work.
 */

interface Body {
  user: string;
  target: string;
  selector: string;
  estimatedGas: number;
  chainId: number;
}

const signer = createSigner(process.env.SIGNER_PRIVATE_KEY as Hex);
const paymaster = process.env.CHAIN_14601_PAYMASTER_ADDRESS as Address;
// The built-in default fee cap of chain 14601 (config.ts).
const maxFeePerGasWei = 200_000_000_000n;
const gas = {
  verificationGasLimit: PAYMASTER_VERIFICATION_GAS_LIMIT,
  postOpGasLimit: PAYMASTER_POST_OP_GAS_LIMIT,
};

const app = Fastify({ logger: false });
app.setValidatorCompiler(validatorCompiler());
app.get("/health", async () => ({ status: "ok", signer: signer.backend }));
app.post("/sponsor/authorize", { schema: { body: AuthorizeBody } }, async (request, reply) => {
  const body = request.body as Body;
  const validAfterSec = Math.floor(Date.now() / 1000);
  const sponsorship = {
    sender: body.user.toLowerCase() as Address,
    target: body.target.toLowerCase() as Address,
    selector: body.selector.toLowerCase() as Hex,
    maxGasCostWei: BigInt(body.estimatedGas) * maxFeePerGasWei,
    validAfterSec,
    validUntilSec: validAfterSec + 300,
    authId: bytesToHex(randomBytes(32)),
  };
  const domain = { chainId: body.chainId, paymaster };
  const signature = signer.signDigest(sponsorshipDigest(domain, sponsorship));
  const paymasterAndData = encodePaymasterAndData(domain, gas, sponsorship, signature);
  return reply.type("application/json").send(
    JSON.stringify({
      authorized: true,
      paymasterAndData,
      signature,
      validUntil: sponsorship.validUntilSec,
      validAfter: sponsorship.validAfterSec,
      authorizationId: sponsorship.authId,
    }),
  );
});

await app.listen({ port: Number(process.env.PORT), host: process.env.HOST ?? "127.0.0.1" });
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void app.close().then(() => process.exit(0)));
}
