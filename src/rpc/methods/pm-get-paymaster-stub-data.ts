/**
 * `pm_getPaymasterStubData` (ERC-7677): paymaster fields of the final length for gas estimation,
 * with the sponsor's name and icon. Refuses early what the final call would refuse whatever the
 * operation's final gas; reserves and signs nothing (sponsor/operation.ts, stubOperation).
 */
import { stubOperation } from "../../sponsor/operation.ts";
import type { RpcMethod } from "./method.ts";
import { operationRequest, refusalAnswer } from "./sponsor-params.ts";

export const pmGetPaymasterStubData: RpcMethod = {
  name: "pm_getPaymasterStubData",
  summary: "stub paymaster fields for gas estimation; nothing is reserved",
  async handle(call) {
    const parsed = operationRequest(call);
    if (parsed.kind === "error") return parsed;
    const outcome = await stubOperation(call.deps, parsed.request);
    if (outcome.kind === "refused") return refusalAnswer(outcome);
    return { kind: "result", json: JSON.stringify(outcome.result) };
  },
};
