/**
 * Sending the owner's transactions: simulate first (a refusal is explained before anything is
 * paid or signed), then send and wait for the receipt. Failures become one-line OperatorErrors
 * naming the contract's error, such as a key that is not the paymaster's owner.
 */
import {
  type Abi,
  type Address,
  BaseError,
  type ContractFunctionArgs,
  type ContractFunctionName,
  ContractFunctionRevertedError,
  type Hex,
  InsufficientFundsError,
  type TransactionReceipt,
} from "viem";
import { OPERATOR_KEY_VARIABLE, OperatorError, rpcHost, type WriteClients } from "./context.ts";

export interface WriteRequest<
  abi extends Abi,
  name extends ContractFunctionName<abi, "nonpayable" | "payable">,
> {
  address: Address;
  abi: abi;
  functionName: name;
  args: ContractFunctionArgs<abi, "nonpayable" | "payable", name>;
  value?: bigint;
}

/** Simulates, sends, waits; resolves to the successful receipt. `what` names the action in errors. */
export async function sendWrite<
  const abi extends Abi,
  name extends ContractFunctionName<abi, "nonpayable" | "payable">,
>(c: WriteClients, what: string, request: WriteRequest<abi, name>): Promise<TransactionReceipt> {
  let hash: Hex;
  try {
    const { request: prepared } = await c.publicClient.simulateContract({
      account: c.wallet.account,
      ...request,
    } as never);
    hash = await c.wallet.writeContract(prepared as never);
  } catch (err) {
    throw explain(err, what, c);
  }
  return waitFor(c, what, hash);
}

export async function waitFor(
  c: Pick<WriteClients, "publicClient" | "target">,
  what: string,
  hash: Hex,
): Promise<TransactionReceipt> {
  let receipt: TransactionReceipt;
  try {
    receipt = await c.publicClient.waitForTransactionReceipt({ hash, timeout: 180_000 });
  } catch (err) {
    throw explain(err, `${what} (transaction ${hash})`, c);
  }
  if (receipt.status !== "success") throw new OperatorError(`${what}: transaction ${hash} reverted`);
  return receipt;
}

/**
 * One line for a failed call or transaction. Errors the contracts define are decoded by name
 * (viem walks the revert data against the ABI given), with a hint for the usual ones.
 */
export function explain(err: unknown, what: string, c: Pick<WriteClients, "target">): Error {
  if (err instanceof OperatorError) return err;
  if (!(err instanceof BaseError)) return err instanceof Error ? err : new Error(String(err));
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError) {
    const name = reverted.data?.errorName;
    const args = (reverted.data?.args ?? []).map(String).join(", ");
    if (name === "OwnableUnauthorizedAccount") {
      return new OperatorError(
        `${what}: the key in ${OPERATOR_KEY_VARIABLE} (${args}) is not the paymaster's owner`,
      );
    }
    if (name && name !== "Error")
      return new OperatorError(`${what}: refused by the contract: ${name}(${args})`);
    const reason = reverted.reason ?? reverted.shortMessage;
    return new OperatorError(`${what}: refused by the contract: ${oneLine(reason)}`);
  }
  if (err.walk((e) => e instanceof InsufficientFundsError)) {
    return new OperatorError(`${what}: the sending account cannot pay the value and the gas`);
  }
  const short = oneLine(err.shortMessage).replaceAll(c.target.rpcUrl, rpcHost(c.target.rpcUrl));
  return new OperatorError(`${what}: ${short}`);
}

function oneLine(text: string): string {
  return text.split("\n")[0]!.trim();
}
