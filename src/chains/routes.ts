import { Type } from "@sinclair/typebox";
import type { RoutePlugin } from "../context.ts";
import { responses } from "../http/schemas.ts";

const EntryPoint = Type.Object({
  version: Type.Union([Type.Literal("0.7"), Type.Literal("0.8")]),
  entryPoint: Type.String(),
  paymaster: Type.Union([Type.String(), Type.Null()], {
    description:
      "Our paymaster for this EntryPoint; null when none is deployed (the EntryPoint is not served)",
  }),
});

const Chain = Type.Object(
  {
    chainId: Type.Integer(),
    name: Type.String(),
    nativeCurrency: Type.Object({ name: Type.String(), symbol: Type.String(), decimals: Type.Integer() }),
    entryPoint: Type.String({ description: "EntryPoint v0.7 (the one POST /sponsor/authorize signs for)" }),
    paymaster: Type.Union([Type.String(), Type.Null()], { description: "Our paymaster for EntryPoint v0.7" }),
    entryPoints: Type.Array(EntryPoint, {
      description:
        "Every EntryPoint of the chain (v0.7, v0.8), each with its own paymaster; served when it has one",
    }),
    confirmations: Type.Integer(),
    maxFeePerGasWei: Type.String({
      description: "Ceiling of the fee oracle: no authorization allows a higher maxFeePerGas",
    }),
    active: Type.Boolean({
      description: "Configured (listed in the CHAINS setting) and reachable: sponsorship works on it now",
    }),
    reachable: Type.Boolean({
      description:
        "The chain's node answers: the fee oracle holds a fresh reading of its fees. False while the chain is unreachable, and for a chain with no paymaster (its fees are not read)",
    }),
  },
  { $id: "Chain" },
);

export const chainRoutes: RoutePlugin = async (app, { services }) => {
  // Built once: the configuration is frozen at boot. RPC URLs are deliberately left out.
  const chains = services.config.chains.map((c) => ({
    chainId: c.chainId,
    name: c.name,
    nativeCurrency: c.nativeCurrency,
    entryPoint: c.entryPoint,
    paymaster: c.paymaster,
    entryPoints: c.entryPoints.map((e) => ({
      version: e.version,
      entryPoint: e.entryPoint,
      paymaster: e.paymaster,
    })),
    confirmations: c.confirmations,
    maxFeePerGasWei: c.maxFeePerGasWei.toString(),
    active: c.active,
  }));
  app.get(
    "/blockchain/chains",
    {
      schema: {
        tags: ["chains"],
        summary: "The EVM chains this service sponsors on",
        response: responses({ 200: Type.Array(Chain) }),
      },
    },
    // `reachable` is read per request: it moves with the fee oracle's cache, with no RPC call here.
    async () =>
      chains.map((c) => {
        const reachable = services.feeOracle.current(c.chainId).kind === "fresh";
        return { ...c, active: c.active && reachable, reachable };
      }),
  );
};
