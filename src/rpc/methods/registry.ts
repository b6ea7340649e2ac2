/** The ERC-7677 methods the endpoint serves, by name: adding one is a file and a line here. */
import type { RpcMethod } from "./method.ts";
import { pmGetPaymasterData } from "./pm-get-paymaster-data.ts";
import { pmGetPaymasterStubData } from "./pm-get-paymaster-stub-data.ts";

export const RPC_METHODS: ReadonlyMap<string, RpcMethod> = new Map(
  [pmGetPaymasterStubData, pmGetPaymasterData].map((m) => [m.name, m]),
);
