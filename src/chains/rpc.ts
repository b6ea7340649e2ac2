import { createPublicClient, http } from "viem";

/**
 * The JSON-RPC client the chain watchers read with. viem's own retries are kept to one: the
 * watchers' poll loop already backs off and retries a whole tick, and a tick that fails halfway
 * is safe to repeat (see settlement-watcher.ts and deposit-watcher.ts).
 */
export function createChainClient(rpcUrl: string, options: { timeoutMs?: number; retryCount?: number } = {}) {
  return createPublicClient({
    transport: http(rpcUrl, {
      timeout: options.timeoutMs ?? 10_000,
      retryCount: options.retryCount ?? 1,
      retryDelay: 200,
    }),
    cacheTime: 0,
  });
}

export type ChainClient = ReturnType<typeof createChainClient>;

/** The newest block the watchers trust: `confirmations` below the head, or null before it exists. */
export function confirmedHead(latestBlock: bigint, confirmations: number): bigint | null {
  const head = latestBlock - BigInt(confirmations);
  return head >= 0n ? head : null;
}
