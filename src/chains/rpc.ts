import { createPublicClient, http, type Transport } from "viem";
import type { RpcErrorKind } from "../metrics/metrics.ts";

/** Told of every failed call of a chain client: its JSON-RPC method and how it failed. */
export type RpcErrorSink = (method: string, kind: RpcErrorKind) => void;

/**
 * The JSON-RPC client the chain watchers read with. viem's own retries are kept to one: the
 * watchers' poll loop already backs off and retries a whole tick, and a tick that fails halfway
 * is safe to repeat (see settlement-watcher.ts and deposit-watcher.ts).
 *
 * `onError` hears of each call that failed once viem gave up on it (its retries included), for
 * the RPC error metrics; the error still reaches the caller unchanged.
 */
export function createChainClient(
  rpcUrl: string,
  options: { timeoutMs?: number; retryCount?: number; onError?: RpcErrorSink } = {},
) {
  const transport = http(rpcUrl, {
    timeout: options.timeoutMs ?? 10_000,
    retryCount: options.retryCount ?? 1,
    retryDelay: 200,
  });
  return createPublicClient({
    transport: options.onError ? reportingErrors(transport, options.onError) : transport,
    cacheTime: 0,
  });
}

export type ChainClient = ReturnType<typeof createChainClient>;

/** A transport whose failed requests are also told to `onError`. */
function reportingErrors<T extends Transport>(transport: T, onError: RpcErrorSink): T {
  const wrapped = ((params: Parameters<T>[0]) => {
    const inner = transport(params);
    const request = (async (args: { method: string }, options?: unknown) => {
      try {
        return await (inner.request as (a: unknown, o?: unknown) => Promise<unknown>)(args, options);
      } catch (err) {
        onError(args.method, rpcErrorKind(err));
        throw err;
      }
    }) as typeof inner.request;
    return { ...inner, request };
  }) as T;
  return wrapped;
}

/** Pure: how a viem transport error failed, by its class name and fields. */
export function rpcErrorKind(err: unknown): RpcErrorKind {
  const e = err as { name?: unknown; code?: unknown; status?: unknown } | null;
  if (e === null || typeof e !== "object") return "other";
  if (e.name === "TimeoutError") return "timeout";
  if (e.name === "HttpRequestError") return typeof e.status === "number" ? "http_status" : "unreachable";
  // viem maps a JSON-RPC error object (and a few HTTP statuses) to an RpcError with its code.
  if (typeof e.code === "number") return "rpc_error";
  return "other";
}

/** The newest block the watchers trust: `confirmations` below the head, or null before it exists. */
export function confirmedHead(latestBlock: bigint, confirmations: number): bigint | null {
  const head = latestBlock - BigInt(confirmations);
  return head >= 0n ? head : null;
}
