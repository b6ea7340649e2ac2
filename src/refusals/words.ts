/**
 * Every error code in plain words, for the studio reading its refusal log ("why are my players
 * not sponsored?"): what happened and, where there is one, what to do. The catalogue's `when`
 * (http/catalogue.ts) is written for the developer calling the API; these are written for the
 * person reading the dashboard. The type makes the map complete: a code added to the catalogue
 * does not compile until it has its words here. The API sends them as `reason`, so the dashboard
 * keeps no copy.
 */
import type { ErrorCode } from "../http/catalogue.ts";

export const REFUSAL_WORDS: Record<ErrorCode, string> = {
  invalid_request: "The request was missing a field or had one in the wrong format.",
  malformed_json: "The request body was empty or was not valid JSON.",
  malformed_request: "The HTTP request itself could not be read.",
  invalid_params: "The paymaster call's parameters were not a user operation the service can sponsor.",
  batch_not_supported: "Several paymaster calls were sent in one request; send one at a time.",
  unsupported_chain: "The request named a chain this service does not sponsor on.",
  unsupported_entry_point: "The request named an EntryPoint this service does not serve on that chain.",
  unsupported_account: "The player's smart account encodes its calls in a way the service cannot read.",
  unsupported_call:
    "The operation makes a kind of call the service never sponsors (for example a delegatecall).",
  malformed_call_data: "The operation's call data was not encoded the standard way.",
  too_many_calls: "The operation bundles more calls than one sponsored operation may hold.",
  fee_above_ceiling: "The operation offered gas fees well above what the chain charges now.",
  invalid_cursor: "The page cursor was not one this service issued.",
  invalid_policy: "A policy rule was not valid.",
  unauthorized: "The API key did not belong to the project named in the request.",
  identity_conflict: "The sign-in email is already linked to another account.",
  forbidden: "The API key is not allowed to sponsor (its scopes leave sponsoring out).",
  not_allowlisted: "The contract or function called is not on the project's allowlist.",
  account_not_supported:
    "The player's smart account is not one the service knows, or has a module it does not know.",
  approval_denied: "The project's approval webhook said no.",
  sender_blocked: "The player's address is on the project's block list.",
  sender_not_allowed: "The project only sponsors listed players, and this address is not on the list.",
  campaign_not_active: "The project's campaign has not started yet or is over.",
  operation_cost_exceeded: "The operation could cost more than the project's limit per operation.",
  sender_cap_exceeded: "The player used up their spend or operation limit for now.",
  insufficient_balance: "The gas tank does not hold enough to pay for the operation: top it up.",
  daily_cap_exceeded: "The project reached its daily spending cap.",
  project_cap_exceeded: "The project reached one of its own spend or operation limits for now.",
  not_found: "The project or route was not found.",
  method_not_found: "The paymaster method called does not exist.",
  method_not_allowed: "The HTTP method is not one this address answers.",
  request_timeout: "The request did not arrive in full in time.",
  conflict: "The request conflicted with the current state.",
  last_owner: "The change would leave the organization without an owner.",
  webhooks_full: "The project already has as many webhook endpoints as it may.",
  allowlist_full: "The project's allowlist is full.",
  quota_exceeded: "The account already has as many organizations or projects as it may.",
  payload_too_large: "The request body was too large.",
  uri_too_long: "The request's address was too long.",
  unsupported_media_type: "The request body was not sent as JSON.",
  idempotency_key_reused: "The client nonce was already used for a different request.",
  headers_too_large: "The request's headers were too large.",
  rate_limited: "The API key sent more requests per minute than its rate limit allows.",
  internal_error: "Something failed inside the service; quote the request id to support.",
  unavailable: "The service's database was briefly unavailable; the client should retry.",
  chain_not_configured: "No paymaster is set up on this chain yet.",
  approval_unavailable: "The project's approval webhook did not answer usably, so the request was refused.",
  chain_unavailable: "The chain's RPC did not answer while the service checked the player's account.",
  fee_oracle_stale: "The service had no recent gas price for the chain; the client should retry.",
};

/** The plain words of a stored code (a code recorded by another version may be unknown here). */
export function reasonOf(code: string): string {
  return (REFUSAL_WORDS as Record<string, string>)[code] ?? "Refused for a reason this version cannot name.";
}
