import { randomBytes } from "node:crypto";
import Fastify from "fastify";
import { type Address, bytesToHex, type Hex } from "viem";
import { validatorCompiler } from "../src/http/validation.ts";
import { type CallAuthorization, callSponsorshipDigest } from "../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS as gas } from "../src/paymaster/gas.ts";
import { encodeCallPaymasterAndData } from "../src/paymaster/layout.ts";
import { AuthorizeBody } from "../src/sponsor/routes.ts";
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
// Fixed fee ceilings: the floor has no fee oracle (a cache lookup in the service).
const maxFeePerGasWei = 3_000_000_000n;
const maxPriorityFeePerGasWei = 1_000_000_000n;
const FLOOR_CODE_HASH: Hex = `0x${"c0".repeat(32)}`;

const app = Fastify({ logger: false });
app.setValidatorCompiler(validatorCompiler());
app.get("/health", async () => ({ status: "ok", signer: signer.backend }));
app.post("/sponsor/authorize", { schema: { body: AuthorizeBody } }, async (request, reply) => {
  const body = request.body as Body;
  const nowSec = Math.floor(Date.now() / 1000);
  const sponsorship: CallAuthorization = {
    sender: body.user.toLowerCase() as Address,
    // The service binds the sender's code hash, read from its cache; the floor signs a constant.
    senderCodeHash: FLOOR_CODE_HASH,
    initCode: "0x",
    target: body.target.toLowerCase() as Address,
    selector: body.selector.toLowerCase() as Hex,
    maxTotalGas: BigInt(body.estimatedGas),
    maxPreVerificationGas: 66_000n,
    maxFeePerGasWei,
    maxPriorityFeePerGasWei,
    validAfterSec: nowSec - 60,
    validUntilSec: nowSec + 300,
    authId: bytesToHex(randomBytes(32)),
  };
  const domain = { chainId: body.chainId, paymaster };
  const signature = signer.signDigest(callSponsorshipDigest(domain, gas, sponsorship));
  const paymasterAndData = encodeCallPaymasterAndData(domain, gas, sponsorship, signature);
  return reply.type("application/json").send(
    JSON.stringify({
      authorized: true,
      paymasterAndData,
      signature,
      validUntil: sponsorship.validUntilSec,
      validAfter: sponsorship.validAfterSec,
      authorizationId: sponsorship.authId,
      maxGasCost: (sponsorship.maxTotalGas * maxFeePerGasWei).toString(),
    }),
  );
});

await app.listen({ port: Number(process.env.PORT), host: process.env.HOST ?? "127.0.0.1" });
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void app.close().then(() => process.exit(0)));
}
