import { type Static, Type } from "@sinclair/typebox";
import { getAddress } from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { reorgTotals } from "../chains/applied-blocks.ts";
import { readCursor, settlementWatcherName } from "../chains/cursors.ts";
import { type ChainClient, createChainClient } from "../chains/rpc.ts";
import { type LiveEntryPoint, liveEntryPoints } from "../config.ts";
import type { RoutePlugin } from "../context.ts";
import type { Queryable } from "../db/db.ts";
import { readDepositCoverage } from "../health/deposit-coverage.ts";
import { ApiError, forbidden } from "../http/problem.ts";
import { bearer, responses, Timestamp } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { TANKS_ON_CHAIN_SQL } from "../ledger/ledger.ts";
import { type PaidTotals, paidTotals, recentUnattributed } from "./store.ts";

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

const EntryPointParity = Type.Object({
  version: Type.Union([Type.Literal("0.7"), Type.Literal("0.8")]),
  entryPoint: Type.String(),
  paymaster: Type.String(),
  entryPointDeposit: Type.Union([Wei, Type.Null()], {
    description: "This paymaster's deposit in its EntryPoint, read now; null when the RPC did not answer",
  }),
  fromBlock: Type.Union([Type.String(), Type.Null()]),
  throughBlock: Type.Union([Type.String(), Type.Null()], {
    description: "The last block this EntryPoint's settlement watcher has read",
  }),
  operations: Type.Integer({ description: "Operations this paymaster paid in the blocks read" }),
  paidOnChain: Wei,
  billed: Wei,
  unattributed: Wei,
  unattributedCount: Type.Integer(),
  inSync: Type.Boolean({ description: "Everything this paymaster paid was charged to a tank" }),
});

const ChainParity = Type.Object(
  {
    chainId: Type.Integer(),
    entryPoint: Type.String({
      description:
        "entryPoint, paymaster, entryPointDeposit, depositCovers, fromBlock, throughBlock, operations, paidOnChain, billed, unattributed and unattributedCount describe EntryPoint v0.7's paymaster (the chain's first live one when v0.7 is not served); entryPoints has each live one",
    }),
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
    entryPoints: Type.Array(EntryPointParity, {
      description: "Every live (EntryPoint, paymaster) pair of the chain, v0.7 first",
    }),
    entryPointDeposits: Type.Union([Wei, Type.Null()], {
      description: "The deposits of every live paymaster added up; null when one could not be read",
    }),
    depositsCover: Type.Union([Type.Boolean(), Type.Null()], {
      description: "entryPointDeposits >= promised: the tanks are shared by every paymaster of the chain",
    }),
    depositCoverage: Type.Object(
      {
        status: Type.Union(
          [Type.Literal("ok"), Type.Literal("low"), Type.Literal("short"), Type.Literal("unknown")],
          {
            description:
              "short: a paymaster's deposit is below its open reservations (authorized operations can fail on chain); low: the deposits are below warnBelow; unknown: a deposit could not be read",
          },
        ),
        warnBelow: Type.String({
          description: "openReservations + warnPercent % of tanks (wei): deposits below it are low",
        }),
        warnPercent: Type.Integer({ description: "PAYMASTER_DEPOSIT_WARN_PERCENT" }),
        detail: Type.String(),
      },
      {
        description:
          "Whether the paymasters' deposits can pay what the service promised; readiness reports the same",
      },
    ),
    inSync: Type.Boolean({
      description:
        "Everything every live paymaster paid was charged to a tank, and no reorganisation is open or left a debt",
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
      client = createChainClient(rpcUrl, {
        timeoutMs: 3_000,
        retryCount: 0,
        onError: (method, kind) => services.metrics.rpcError(chainId, method, kind),
      });
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
      const live = chain ? liveEntryPoints(chain) : [];
      if (!chain || live.length === 0) {
        throw new ApiError("not_found", `no paymaster is configured on chain ${request.params.chainId}`);
      }
      const fromBlock = request.query.fromBlock === undefined ? null : BigInt(request.query.fromBlock);
      const client = clientFor(chain.chainId, chain.rpcUrl);
      const [pairs, promised, unattributed, reorgs, coverage] = await Promise.all([
        Promise.all(live.map((pair) => pairParity(db, client, chain.chainId, pair, fromBlock))),
        promisedWei(db, chain.chainId),
        recentUnattributed(db, chain.chainId, 20),
        reorgTotals(db, chain.chainId),
        readDepositCoverage(db, client, chain, config.depositWarnPercent),
      ]);
      const promisedTotal = promised.tanksWei + promised.reservedWei;
      // The top-level fields describe the first pair (v0.7's), as they did before v0.8.
      const first = pairs[0]!;
      const deposits = pairs.some((p) => p.depositWei === null)
        ? null
        : pairs.reduce((sum, p) => sum + p.depositWei!, 0n);
      const reorgsSettled = reorgs.unreconciled === 0 && reorgs.shortfallWei === 0n;
      return {
        chainId: chain.chainId,
        entryPoint: first.report.entryPoint,
        paymaster: first.report.paymaster,
        generatedAt: new Date(services.now()).toISOString(),
        entryPointDeposit: first.report.entryPointDeposit,
        tanks: promised.tanksWei.toString(),
        openReservations: promised.reservedWei.toString(),
        promised: promisedTotal.toString(),
        depositCovers: first.depositWei === null ? null : first.depositWei >= promisedTotal,
        fromBlock: first.report.fromBlock,
        throughBlock: first.report.throughBlock,
        operations: first.report.operations,
        paidOnChain: first.report.paidOnChain,
        billed: first.report.billed,
        unattributed: first.report.unattributed,
        unattributedCount: first.report.unattributedCount,
        recentUnattributed: unattributed,
        reorgs: {
          detected: reorgs.detected,
          unreconciled: reorgs.unreconciled,
          shortfall: reorgs.shortfallWei.toString(),
          lastDetectedAt: reorgs.lastDetectedAt,
        },
        entryPoints: pairs.map((p) => p.report),
        entryPointDeposits: deposits === null ? null : deposits.toString(),
        depositsCover: deposits === null ? null : deposits >= promisedTotal,
        depositCoverage: {
          status: coverage.state,
          warnBelow: coverage.warnBelowWei.toString(),
          warnPercent: coverage.warnPercent,
          detail: coverage.detail,
        },
        inSync: pairs.every((p) => p.report.inSync) && reorgsSettled,
      };
    },
  );
};

/** What one live paymaster paid on chain against what was billed, and its deposit now. */
async function pairParity(
  db: Queryable,
  client: ChainClient,
  chainId: number,
  pair: LiveEntryPoint,
  fromBlock: bigint | null,
): Promise<{ depositWei: bigint | null; report: Static<typeof EntryPointParity> }> {
  const [totals, cursor, depositWei]: [PaidTotals, bigint | null, bigint | null] = await Promise.all([
    paidTotals(db, chainId, pair.paymaster.toLowerCase(), fromBlock),
    readCursor(db, chainId, settlementWatcherName(pair.version)),
    entryPointDeposit(client, pair.entryPoint, pair.paymaster),
  ]);
  return {
    depositWei,
    report: {
      version: pair.version,
      entryPoint: getAddress(pair.entryPoint),
      paymaster: getAddress(pair.paymaster),
      entryPointDeposit: depositWei === null ? null : depositWei.toString(),
      fromBlock: totals.fromBlock?.toString() ?? null,
      throughBlock: cursor !== null && cursor > 0n ? (cursor - 1n).toString() : null,
      operations: totals.operations,
      paidOnChain: totals.paidWei.toString(),
      billed: totals.billedWei.toString(),
      unattributed: totals.unattributedWei.toString(),
      unattributedCount: totals.unattributedCount,
      inSync: totals.unattributedWei === 0n,
    },
  };
}

/** The chain's tanks plus the reservations still open on it: what the chain's paymaster deposits back. */
async function promisedWei(
  db: Queryable,
  chainId: number,
): Promise<{ tanksWei: bigint; reservedWei: bigint }> {
  const rows = await db.query<{ tanks: string; reserved: string }>(
    `SELECT (${TANKS_ON_CHAIN_SQL})::text AS tanks,
       (SELECT COALESCE(sum(max_gas_cost), 0) FROM sponsorship_status_index
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
