/**
 * One ERC-7677 (JSON-RPC) method: its name, what it does, and its handler. The transport
 * (rpc/routes.ts) frames the request, authenticates the caller through the same hook as the REST
 * API, finds the method in the registry (registry.ts) and maps whatever a handler throws
 * (ApiError, an unavailable database) to a JSON-RPC error; a handler answers a result or a
 * refusal of its own.
 */
import type { FastifyRequest } from "fastify";
import type { SponsorDeps } from "../../sponsor/deps.ts";
import type { JsonRpcError } from "../json-rpc.ts";

export interface RpcCall {
  request: FastifyRequest;
  deps: SponsorDeps;
  /** The project of the caller's API key, and the key. */
  projectId: string;
  apiKeyId: number;
  params: unknown[];
}

/** A result as its exact JSON text (a final answer is replayed byte for byte), or an error. */
export type RpcAnswer = { kind: "result"; json: string } | { kind: "error"; error: JsonRpcError };

export interface RpcMethod {
  name: string;
  summary: string;
  handle(call: RpcCall): Promise<RpcAnswer>;
}
