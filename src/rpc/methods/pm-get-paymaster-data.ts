/**
 * `pm_getPaymasterData` (ERC-7677): the whole operation authorized, its maximum cost reserved
 * from the tank, and the paymaster fields signed (sponsor/operation.ts, sponsorOperation). The
 * answer is stored for replays as the result's exact text.
 */
import { sponsorOperation } from "../../sponsor/operation.ts";
import type { RpcMethod } from "./method.ts";
import { operationRequest, refusalAnswer } from "./sponsor-params.ts";

export const pmGetPaymasterData: RpcMethod = {
  name: "pm_getPaymasterData",
  summary: "final paymaster fields: the operation is authorized, reserved and signed",
  async handle(call) {
    const parsed = operationRequest(call);
    if (parsed.kind === "error") return parsed;
    const outcome = await sponsorOperation(call.deps, parsed.request);
    if (outcome.kind === "refused") return refusalAnswer(outcome);
    return { kind: "result", json: outcome.body };
  },
};
