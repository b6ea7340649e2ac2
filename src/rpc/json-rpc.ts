/**
 * JSON-RPC 2.0 envelopes for the ERC-7677 endpoint: parsing a request, and the error codes.
 * Every failure a client can provoke is a JSON-RPC error object whose `data.code` is the same
 * stable code the REST API puts in its problem+json (`not_allowlisted`, `insufficient_balance`,
 * `unsupported_account`, …), so a client handles both the same way.
 */

import { ERRORS, type ErrorCode } from "../http/catalogue.ts";

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest {
  id: JsonRpcId;
  method: string;
  params: unknown[];
}

export interface JsonRpcError {
  code: number;
  message: string;
  data: { code: ErrorCode; callIndex?: number; retryAfterSec?: number; ruleId?: string };
}

/** The JSON-RPC error for a catalogue code, with the catalogue's numeric code for it. */
export function rpcError(
  dataCode: ErrorCode,
  message: string,
  extra: Partial<Omit<JsonRpcError["data"], "code">> = {},
): JsonRpcError {
  return { code: ERRORS[dataCode].rpc, message, data: { code: dataCode, ...extra } };
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
      error: rpcError("malformed_json", "the body is not valid JSON"),
    };
  }
  if (Array.isArray(body)) {
    return {
      kind: "error",
      id: null,
      error: rpcError("batch_not_supported", "batch requests are not supported: send one request per call"),
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
  return { kind: "error", id, error: rpcError("invalid_request", message) };
}

export function success(id: JsonRpcId, result: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, result });
}

export function failure(id: JsonRpcId, error: JsonRpcError): string {
  return JSON.stringify({ jsonrpc: "2.0", id, error });
}
