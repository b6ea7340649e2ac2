/**
 * JSON-RPC 2.0 envelopes for the ERC-7677 endpoint: parsing a request, and the error codes.
 * Every failure a client can provoke is a JSON-RPC error object whose `data.code` is the same
 * stable code the REST API puts in its problem+json (`not_allowlisted`, `insufficient_balance`,
 * `unsupported_account`, …), so a client handles both the same way.
 */

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest {
  id: JsonRpcId;
  method: string;
  params: unknown[];
}

export interface JsonRpcError {
  code: number;
  message: string;
  data: { code: string; callIndex?: number; retryAfterSec?: number };
}

/** The JSON-RPC numeric code for each kind of failure (ERC-1474 where it has one). */
export const RPC_CODES = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** A request the service understood and refused: data.code says why. */
  refused: -32000,
  unauthorized: -32001,
  /** ERC-1474's "limit exceeded". */
  rateLimited: -32005,
} as const;

export function rpcError(
  code: number,
  dataCode: string,
  message: string,
  extra: Partial<JsonRpcError["data"]> = {},
): JsonRpcError {
  return { code, message, data: { code: dataCode, ...extra } };
}

export type Parsed =
  | { kind: "request"; request: JsonRpcRequest }
  | { kind: "error"; id: JsonRpcId; error: JsonRpcError };

/** Parses the raw body into one request; batches, notifications-only shapes and junk are errors. */
export function parseRequest(raw: string): Parsed {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return {
      kind: "error",
      id: null,
      error: rpcError(RPC_CODES.parse, "malformed_json", "the body is not valid JSON"),
    };
  }
  if (Array.isArray(body)) {
    return {
      kind: "error",
      id: null,
      error: rpcError(
        RPC_CODES.invalidRequest,
        "batch_not_supported",
        "batch requests are not supported: send one request per call",
      ),
    };
  }
  if (typeof body !== "object" || body === null)
    return invalid(null, "the request must be a JSON-RPC 2.0 object");
  const o = body as Record<string, unknown>;
  const id = validId(o.id) ? (o.id as JsonRpcId) : null;
  if (o.jsonrpc !== "2.0") return invalid(id, 'jsonrpc must be "2.0"');
  if (!validId(o.id)) return invalid(null, "id must be a string, a number or null");
  if (typeof o.method !== "string" || o.method.length === 0 || o.method.length > 64) {
    return invalid(id, "method must be a non-empty string");
  }
  const params = o.params === undefined ? [] : o.params;
  if (!Array.isArray(params)) return invalid(id, "params must be an array");
  return { kind: "request", request: { id, method: o.method, params } };
}

function validId(id: unknown): boolean {
  return (
    id === null ||
    (typeof id === "string" && id.length <= 128) ||
    (typeof id === "number" && Number.isSafeInteger(id))
  );
}

function invalid(id: JsonRpcId, message: string): Parsed {
  return { kind: "error", id, error: rpcError(RPC_CODES.invalidRequest, "invalid_request", message) };
}

export function success(id: JsonRpcId, result: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, result });
}

export function failure(id: JsonRpcId, error: JsonRpcError): string {
  return JSON.stringify({ jsonrpc: "2.0", id, error });
}

/** The JSON-RPC code for a stable service code (the REST API's), by its meaning. */
export function rpcCodeFor(code: string): number {
  switch (code) {
    case "unauthorized":
      return RPC_CODES.unauthorized;
    case "rate_limited":
      return RPC_CODES.rateLimited;
    case "invalid_params":
    case "invalid_request":
    case "unsupported_chain":
    case "unsupported_entry_point":
      return RPC_CODES.invalidParams;
    case "internal_error":
      return RPC_CODES.internal;
    default:
      return RPC_CODES.refused;
  }
}
