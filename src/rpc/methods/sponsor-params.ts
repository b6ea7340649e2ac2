/**
 * The parameters both paymaster methods take ([userOperation, entryPoint, chainId, context]) as
 * the sponsorship use case's request, or the JSON-RPC error that refuses them.
 */
import type { OperationRequest, Refusal } from "../../sponsor/operation.ts";
import { rpcError } from "../json-rpc.ts";
import { parseSponsorParams } from "../user-operation.ts";
import type { RpcAnswer, RpcCall } from "./method.ts";

export function operationRequest(
  call: RpcCall,
): { kind: "request"; request: OperationRequest } | Extract<RpcAnswer, { kind: "error" }> {
  const p = parseSponsorParams(call.params);
  if (p.kind === "invalid") return { kind: "error", error: rpcError("invalid_params", p.detail) };
  if (p.params.context.projectId !== undefined && p.params.context.projectId !== call.projectId) {
    return { kind: "error", error: rpcError("unauthorized", "this API key belongs to another project") };
  }
  return { kind: "request", request: { projectId: call.projectId, apiKeyId: call.apiKeyId, ...p.params } };
}

/** A refusal of the use case as a JSON-RPC error, with the call and the rule it names. */
export function refusalAnswer(outcome: Refusal): RpcAnswer {
  const extra = {
    ...(outcome.callIndex === undefined ? {} : { callIndex: outcome.callIndex }),
    ...(outcome.ruleId === undefined ? {} : { ruleId: outcome.ruleId }),
  };
  return { kind: "error", error: rpcError(outcome.code, outcome.detail, extra) };
}
