/**
 * The ERC-7677 end-to-end fixture the account-type test files share: the service on a fresh
 * anvil chain with the EntryPoint v0.7 stack, a real Alto bundler, a project whose mints on the
 * game contract are allowlisted and whose tank holds `tankWei`, and the service listening on a
 * port of its own so that viem's paymaster client reaches `/rpc` over real HTTP.
 */
import type { AddressInfo } from "node:net";
import { type Address, encodeFunctionData, type Hex, http } from "viem";
import { createBundlerClient, createPaymasterClient, type SmartAccount } from "viem/account-abstraction";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { seedProject, type TestApp } from "./app.ts";
import { type Bundler, startBundler } from "./bundler.ts";
import type { DevChain } from "./chain/anvil.ts";
import { type DevnetStack, gameItemsAbi } from "./chain/devnet.ts";
import {
  allowlist,
  MINT_SELECTOR,
  type Project,
  type ServiceOnChain,
  startServiceOnChain,
} from "./chain-service.ts";

export interface Erc7677Fixture {
  service: ServiceOnChain;
  chain: DevChain;
  stack: DevnetStack;
  t: TestApp;
  p: Project;
  bundler: Bundler;
  /** The service's `/rpc` on its own port. */
  rpcUrl: string;
  stop(): Promise<void>;
}

export async function startErc7677Fixture(options: {
  tankWei: bigint;
  /** The tank deposit's reference (one per file). */
  tankReference: string;
  /** Contracts the file's accounts need, deployed before the bundler starts. */
  prepare?(chain: DevChain): Promise<unknown>;
}): Promise<Erc7677Fixture> {
  const service = await startServiceOnChain({ confirmations: 0 });
  const { chain, stack, t } = service;
  let bundler: Bundler | undefined;
  try {
    await options.prepare?.(chain);
    bundler = await startBundler({ rpcUrl: chain.rpcUrl, entryPoints: [stack.entryPoint] });
    const p = await seedProject(t);
    await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: options.tankReference,
      amountWei: options.tankWei,
    });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const rpcUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/rpc`;
    const started = bundler;
    return {
      service,
      chain,
      stack,
      t,
      p,
      bundler: started,
      rpcUrl,
      async stop() {
        await started.stop();
        await service.stop();
      },
    };
  } catch (err) {
    await bundler?.stop();
    await service.stop();
    throw err;
  }
}

/**
 * viem's bundler client for the account, with `createPaymasterClient` pointed at the service:
 * the project's key in the Authorization header, or in the URL (`?apikey=`) as wallets send it.
 */
export function sponsoredBundlerClient<A extends SmartAccount>(
  f: Pick<Erc7677Fixture, "chain" | "p" | "bundler" | "rpcUrl">,
  account: A,
  { keyInUrl = false }: { keyInUrl?: boolean } = {},
) {
  const paymaster = createPaymasterClient({
    transport: http(keyInUrl ? `${f.rpcUrl}?apikey=${f.p.apiKey}` : f.rpcUrl, {
      fetchOptions: keyInUrl ? {} : { headers: { authorization: `Bearer ${f.p.apiKey}` } },
    }),
  });
  return createBundlerClient({
    client: f.chain.publicClient,
    chain: f.chain.chain,
    account,
    paymaster,
    transport: http(f.bundler.url),
    pollingInterval: 50,
  });
}

/** The authorizations the project has on record (granted, whatever became of them). */
export async function sponsorshipCount(f: Pick<Erc7677Fixture, "t" | "p">): Promise<number> {
  const [row] = await f.t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1",
    [f.p.projectId],
  );
  return row!.n;
}

export interface Call {
  to: Address;
  data: Hex;
}

/** A call minting `itemId` on the stack's game contract (allowlisted by the fixture). */
export function mintCall(stack: Pick<DevnetStack, "gameItems">, itemId: bigint): Call {
  return {
    to: stack.gameItems,
    data: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [itemId] }),
  };
}
