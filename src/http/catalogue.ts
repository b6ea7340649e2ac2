/**
 * Every error code the service can answer with, in one place: its HTTP status, a title, when it
 * happens, and the JSON-RPC error code the ERC-7677 endpoint uses for it. The REST API renders
 * these as problem+json (`code` is the key), `/rpc` as JSON-RPC errors whose `data.code` is the
 * same key. Use cases return these codes as values; only the HTTP edge turns them into responses.
 *
 * A code is part of the interface: never rename one, add a new one instead.
 */

/** JSON-RPC 2.0 error codes (ERC-1474 where it names one). */
export const RPC_CODES = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** A request the service understood and refused: data.code says why. */
  refused: -32000,
  unauthorized: -32001,
  /** ERC-1474's "resource unavailable". */
  unavailable: -32002,
  /** ERC-1474's "limit exceeded". */
  rateLimited: -32005,
} as const;

export interface ErrorSpec {
  status: number;
  title: string;
  /** When the service answers with it, for the OpenAPI document and the README. */
  when: string;
  rpc: number;
}

const refused = RPC_CODES.refused;
const badParams = RPC_CODES.invalidParams;

export const ERRORS = {
  // 400: the request itself is wrong; nothing was changed.
  invalid_request: {
    status: 400,
    title: "Invalid request",
    when: "A field, parameter or header is missing, malformed, out of range, or unknown.",
    rpc: RPC_CODES.invalidRequest,
  },
  malformed_json: {
    status: 400,
    title: "Malformed JSON",
    when: "The body is empty or not valid JSON.",
    rpc: RPC_CODES.parse,
  },
  malformed_request: {
    status: 400,
    title: "Malformed HTTP request",
    when: "The HTTP request could not be parsed (request line, headers, framing or URL encoding).",
    rpc: RPC_CODES.invalidRequest,
  },
  invalid_params: {
    status: 400,
    title: "Invalid parameters",
    when: "A JSON-RPC call's params are not a user operation the service can sponsor as sent.",
    rpc: badParams,
  },
  batch_not_supported: {
    status: 400,
    title: "Batch not supported",
    when: "A JSON-RPC batch (an array of calls) was sent; send one call per request.",
    rpc: RPC_CODES.invalidRequest,
  },
  unsupported_chain: {
    status: 400,
    title: "Unsupported chain",
    when: "The chain id is not one the service sponsors on.",
    rpc: badParams,
  },
  unsupported_entry_point: {
    status: 400,
    title: "Unsupported entry point",
    when: "The entry point is not served on that chain.",
    rpc: badParams,
  },
  unsupported_account: {
    status: 400,
    title: "Unsupported account",
    when: "The operation's calldata is not an execute encoding of a supported smart account.",
    rpc: refused,
  },
  unsupported_call: {
    status: 400,
    title: "Unsupported call",
    when: "A call the account would make cannot be sponsored (no call, delegatecall, a call mode the service does not decode).",
    rpc: refused,
  },
  malformed_call_data: {
    status: 400,
    title: "Malformed call data",
    when: "The operation's calldata is not the canonical ABI encoding of its execute function.",
    rpc: refused,
  },
  too_many_calls: {
    status: 400,
    title: "Too many calls",
    when: "The operation batches more calls than the service sponsors in one operation.",
    rpc: refused,
  },
  fee_above_ceiling: {
    status: 400,
    title: "Fee above ceiling",
    when: "The operation's fees are above what the chain charges now (with headroom).",
    rpc: refused,
  },
  invalid_cursor: {
    status: 400,
    title: "Invalid cursor",
    when: "An events or deposits cursor that this service did not issue, or an events cursor sent together with an offset.",
    rpc: badParams,
  },
  invalid_policy: {
    status: 400,
    title: "Invalid policy",
    when: "A policy rule is malformed for its kind (fields, window, campaign times, sender list), duplicates another rule of the project, or would take the project past its number of rules.",
    rpc: RPC_CODES.invalidRequest,
  },
  invalid_abi: {
    status: 400,
    title: "Invalid ABI",
    when: "An uploaded contract ABI is not a JSON ABI array, or none of its entries is a function with a valid signature.",
    rpc: RPC_CODES.invalidRequest,
  },
  // 401 and 403: who is asking, and may they.
  unauthorized: {
    status: 401,
    title: "Unauthorized",
    when: "The API key or access token is missing, malformed, unknown, revoked or expired.",
    rpc: RPC_CODES.unauthorized,
  },
  identity_conflict: {
    status: 401,
    title: "Identity conflict",
    when: "The token's email is already linked to another identity at the provider.",
    rpc: RPC_CODES.unauthorized,
  },
  forbidden: {
    status: 403,
    title: "Forbidden",
    when: "The caller is known but its role or the key's scopes do not allow this.",
    rpc: refused,
  },
  not_allowlisted: {
    status: 403,
    title: "Not allowlisted",
    when: "A call's target contract and selector are not on the project's allowlist.",
    rpc: refused,
  },
  account_not_supported: {
    status: 403,
    title: "Account not supported",
    when: "The sender's code (through its proxy, clone, EIP-7702 delegation or factory) is not a known account implementation, has a module or hook the service does not know, or lacks the entry point the call needs; `detail` says which. A project may opt in to unknown accounts (`unknown_accounts: caps_only`).",
    rpc: refused,
  },
  approval_denied: {
    status: 403,
    title: "Approval denied",
    when: "The project's approval webhook answered no; `detail` carries its reason when it gave one. Nothing was reserved.",
    rpc: refused,
  },
  sender_blocked: {
    status: 403,
    title: "Sender blocked",
    when: "The sender is on the project's sender blocklist; `ruleId` names the rule.",
    rpc: refused,
  },
  sender_not_allowed: {
    status: 403,
    title: "Sender not allowed",
    when: "The project sponsors only the senders of its sender allowlist, and this one is not on it; `ruleId` names the rule.",
    rpc: refused,
  },
  campaign_not_active: {
    status: 403,
    title: "Campaign not active",
    when: "The project's campaign has not started yet or has ended; `ruleId` names the rule.",
    rpc: refused,
  },
  operation_cost_exceeded: {
    status: 403,
    title: "Operation cost exceeded",
    when: "The operation's maximum cost (maxGasCost) is above the project's per-operation cap; `ruleId` names the rule.",
    rpc: refused,
  },
  sender_cap_exceeded: {
    status: 403,
    title: "Sender cap exceeded",
    when: "The sender has used up a per-sender spend or operation cap in the current window; `ruleId` names the rule.",
    rpc: refused,
  },
  // 402: money.
  insufficient_balance: {
    status: 402,
    title: "Insufficient balance",
    when: "The gas tank cannot cover the sponsorship's maximum cost.",
    rpc: refused,
  },
  daily_cap_exceeded: {
    status: 402,
    title: "Daily cap exceeded",
    when: "The sponsorship would take the project past its daily cap (`ruleId` daily_cap).",
    rpc: refused,
  },
  project_cap_exceeded: {
    status: 402,
    title: "Project cap exceeded",
    when: "The sponsorship would take the project past a project-wide spend or operation cap in the current window; `ruleId` names the rule.",
    rpc: refused,
  },
  // 404, 405, 408, 409, 413, 414, 415, 422, 431.
  not_found: {
    status: 404,
    title: "Not found",
    when: "No such route, or the resource does not exist or is not visible to the caller.",
    rpc: refused,
  },
  method_not_found: {
    status: 404,
    title: "Method not found",
    when: "The JSON-RPC method is not one the paymaster service offers.",
    rpc: RPC_CODES.methodNotFound,
  },
  method_not_allowed: {
    status: 405,
    title: "Method not allowed",
    when: "The HTTP method is not one the service answers.",
    rpc: RPC_CODES.invalidRequest,
  },
  request_timeout: {
    status: 408,
    title: "Request timeout",
    when: "The request did not arrive in full within the server's time limit; the connection is closed.",
    rpc: RPC_CODES.invalidRequest,
  },
  conflict: {
    status: 409,
    title: "Conflict",
    when: "The change conflicts with the current state (a taken id or slug, removing the last owner).",
    rpc: refused,
  },
  last_owner: {
    status: 409,
    title: "Last owner",
    when: "The change would leave the organization without an owner.",
    rpc: refused,
  },
  webhooks_full: {
    status: 409,
    title: "Webhooks full",
    when: "The project already has the most webhook endpoints a project may have.",
    rpc: refused,
  },
  allowlist_full: {
    status: 409,
    title: "Allowlist full",
    when: "The project's allowlist already holds the most entries a project may have.",
    rpc: refused,
  },
  contracts_full: {
    status: 409,
    title: "Contracts full",
    when: "The project already has the most contract ABIs a project may have.",
    rpc: refused,
  },
  quota_exceeded: {
    status: 409,
    title: "Quota exceeded",
    when: "The developer already has as many organizations or projects as the service allows.",
    rpc: refused,
  },
  payload_too_large: {
    status: 413,
    title: "Content too large",
    when: "The request body is over the size limit.",
    rpc: RPC_CODES.invalidRequest,
  },
  uri_too_long: {
    status: 414,
    title: "URI too long",
    when: "The URL or one of its path parameters is over the length limit.",
    rpc: RPC_CODES.invalidRequest,
  },
  unsupported_media_type: {
    status: 415,
    title: "Unsupported media type",
    when: "The body is not sent as application/json.",
    rpc: RPC_CODES.invalidRequest,
  },
  idempotency_key_reused: {
    status: 422,
    title: "Idempotency key reused",
    when: "A clientNonce was already used for a different request.",
    rpc: refused,
  },
  headers_too_large: {
    status: 431,
    title: "Request headers too large",
    when: "The request's headers are over the size limit.",
    rpc: RPC_CODES.invalidRequest,
  },
  // 429: too much.
  rate_limited: {
    status: 429,
    title: "Rate limited",
    when: "The API key, developer or client address is over its request budget; Retry-After says when to retry.",
    rpc: RPC_CODES.rateLimited,
  },
  // 5xx: the service's side; retry.
  internal_error: {
    status: 500,
    title: "Internal error",
    when: "An unexpected failure; the body carries nothing but the requestId to quote.",
    rpc: RPC_CODES.internal,
  },
  unavailable: {
    status: 503,
    title: "Service unavailable",
    when: "A dependency (the database) is unavailable or a lock was not granted in time; retry after Retry-After.",
    rpc: RPC_CODES.unavailable,
  },
  chain_not_configured: {
    status: 503,
    title: "Chain not configured",
    when: "The chain is supported but no paymaster is configured on it yet.",
    rpc: RPC_CODES.unavailable,
  },
  approval_unavailable: {
    status: 503,
    title: "Approval unavailable",
    when: "The project's approval webhook failed (an error, a timeout, an unusable answer) and the project fails closed. Nothing was reserved.",
    rpc: RPC_CODES.unavailable,
  },
  chain_unavailable: {
    status: 503,
    title: "Chain unavailable",
    when: "The chain's RPC did not answer while the service read the sender's code; retry shortly.",
    rpc: RPC_CODES.unavailable,
  },
  fee_oracle_stale: {
    status: 503,
    title: "Fee oracle stale",
    when: "The service has no recent fee reading for the chain; retry shortly.",
    rpc: RPC_CODES.unavailable,
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export function statusOf(code: ErrorCode): number {
  return ERRORS[code].status;
}

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERRORS, code);
}
