import { Type } from "@sinclair/typebox";
import { getAddress } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { reorgTotals } from "../chains/applied-blocks.ts";
import { readCursor } from "../chains/cursors.ts";
import { type ChainClient, createChainClient } from "../chains/rpc.ts";
import type { RoutePlugin } from "../context.ts";
import type { Queryable } from "../db/db.ts";
import { ApiError, forbidden } from "../http/problem.ts";
import { bearer, responses, Timestamp } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { paidTotals, recentUnattributed } from "./store.ts";
import { SETTLEMENT_WATCHER } from "./watcher.ts";

const Wei = Type.String({ pattern: "^(0|[1-9][0-9]{0,78})$" });

const Unattributed = Type.Object({
  txHash: Type.String(),
  userOpHash: Type.String(),
  blockNumber: Type.String(),
  authId: Type.Union([Type.String(), Type.Null()]),
  projectId: Type.Union([Type.String(), Type.Null()]),
  actualGasCost: Wei,
  billed: Wei,
  reason: Type.String(),
});

const ChainParity = Type.Object(
  {
    chainId: Type.Integer(),
    entryPoint: Type.String(),
    paymaster: Type.String(),
    generatedAt: Timestamp,
    entryPointDeposit: Type.Union([Wei, Type.Null()], {
      description: "The paymaster's deposit in the EntryPoint, read now; null when the RPC did not answer",
    }),
    tanks: Wei,
    openReservations: Wei,
    promised: Type.String({ description: "tanks + openReservations: what the deposit must cover" }),
    depositCovers: Type.Union([Type.Boolean(), Type.Null()]),
    fromBlock: Type.Union([Type.String(), Type.Null()]),
    throughBlock: Type.Union([Type.String(), Type.Null()], {
      description: "The last block the settlement watcher has read",
    }),
    operations: Type.Integer({ description: "Operations our paymaster paid in the blocks read" }),
    paidOnChain: Wei,
    billed: Wei,
    unattributed: Wei,
    unattributedCount: Type.Integer(),
    recentUnattributed: Type.Array(Unattributed),
    reorgs: Type.Object({
      detected: Type.Integer({ description: "Reorganisations deeper than the confirmation depth, ever" }),
      unreconciled: Type.Integer(),
      shortfall: Type.String({
        description: "Deposits a reorganisation removed after the tank had spent them (wei): a debt",
      }),
      lastDetectedAt: Type.Union([Timestamp, Type.Null()]),
    }),
    inSync: Type.Boolean({
      description:
        "Everything the paymaster paid was charged to a tank, and no reorganisation is open or left a debt",
    }),
  },
  { $id: "ChainParityReport" },
);

export const settlementRoutes: RoutePlugin = async (app, { services }) => {
  const { db, config } = services;
  const clients = new Map<number, ChainClient>();
  const clientFor = (chainId: number, rpcUrl: string) => {
    let client = clients.get(chainId);
    if (!client) {
      client = createChainClient(rpcUrl, { timeoutMs: 3_000, retryCount: 0 });
      clients.set(chainId, client);
    }
    return client;
  };

  app.get(
    "/blockchain/chains/:chainId/parity",
    {
      schema: {
        tags: ["chains"],
        security: bearer,
        summary:
          "Chain parity for operators: what the paymaster paid on chain against what the tanks were charged",
        params: Type.Object({ chainId: Type.Integer({ minimum: 1 }) }, { additionalProperties: false }),
        querystring: Type.Object(
          { fromBlock: Type.Optional(Type.Integer({ minimum: 0, description: "Count from this block on" })) },
          { additionalProperties: false },
        ),
        response: responses({ 200: ChainParity }),
      },
    },
    async (request) => {
      const principal = requirePrincipal(request);
      if (principal.kind !== "developer" || !config.operatorEmails.includes(principal.email)) {
        throw forbidden("chain parity is for the service's operators");
      }
      const chain = config.chains.find((c) => c.chainId === request.params.chainId && c.active);
      if (!chain?.paymaster) {
        throw new ApiError(404, "not_found", `no paymaster is configured on chain ${request.params.chainId}`);
      }
      const paymaster = chain.paymaster.toLowerCase();
      const fromBlock = request.query.fromBlock === undefined ? null : BigInt(request.query.fromBlock);
      const [totals, promised, cursor, deposit, unattributed, reorgs] = await Promise.all([
        paidTotals(db, chain.chainId, paymaster, fromBlock),
        promisedWei(db, chain.chainId),
        readCursor(db, chain.chainId, SETTLEMENT_WATCHER),
        entryPointDeposit(clientFor(chain.chainId, chain.rpcUrl), chain.entryPoint, chain.paymaster),
        recentUnattributed(db, chain.chainId, 20),
        reorgTotals(db, chain.chainId),
      ]);
      const promisedTotal = promised.tanksWei + promised.reservedWei;
      return {
        chainId: chain.chainId,
        entryPoint: getAddress(chain.entryPoint),
        paymaster: getAddress(chain.paymaster),
        generatedAt: new Date(services.now()).toISOString(),
        entryPointDeposit: deposit === null ? null : deposit.toString(),
        tanks: promised.tanksWei.toString(),
        openReservations: promised.reservedWei.toString(),
        promised: promisedTotal.toString(),
        depositCovers: deposit === null ? null : deposit >= promisedTotal,
        fromBlock: totals.fromBlock?.toString() ?? null,
        throughBlock: cursor !== null && cursor > 0n ? (cursor - 1n).toString() : null,
        operations: totals.operations,
        paidOnChain: totals.paidWei.toString(),
        billed: totals.billedWei.toString(),
        unattributed: totals.unattributedWei.toString(),
        unattributedCount: totals.unattributedCount,
        recentUnattributed: unattributed,
        reorgs: {
          detected: reorgs.detected,
          unreconciled: reorgs.unreconciled,
          shortfall: reorgs.shortfallWei.toString(),
          lastDetectedAt: reorgs.lastDetectedAt,
        },
        inSync: totals.unattributedWei === 0n && reorgs.unreconciled === 0 && reorgs.shortfallWei === 0n,
      };
    },
  );
};

/** Every tank's balance plus the reservations still open on the chain: what the deposit backs. */
async function promisedWei(
  db: Queryable,
  chainId: number,
): Promise<{ tanksWei: bigint; reservedWei: bigint }> {
  const rows = await db.query<{ tanks: string; reserved: string }>(
    `SELECT (SELECT COALESCE(sum(gas_tank_balance), 0) FROM projects)::text AS tanks,
       (SELECT COALESCE(sum(max_gas_cost), 0) FROM sponsorships
         WHERE chain_id = $1 AND status = 'pending')::text AS reserved`,
    [chainId],
  );
  return { tanksWei: BigInt(rows[0]!.tanks), reservedWei: BigInt(rows[0]!.reserved) };
}

async function entryPointDeposit(
  client: ChainClient,
  entryPoint: `0x${string}`,
  paymaster: `0x${string}`,
): Promise<bigint | null> {
  try {
    return await client.readContract({
      address: entryPoint,
      abi: entryPoint07Abi,
      functionName: "balanceOf",
      args: [paymaster],
    });
  } catch {
    return null;
  }
}
