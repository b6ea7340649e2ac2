/**
 * Native-token transfers inside one transaction, read from a `callTracer` trace: the pure part
 * of the deposit watcher.
 *
 * A frame moves value to its `to` when it is a CALL with value or a SELFDESTRUCT (which pays the
 * dying contract's balance to its beneficiary). DELEGATECALL and STATICCALL carry no value, and
 * CALLCODE keeps the value with the caller. A transfer counts only when neither its frame nor
 * any frame above it reverted, since a revert undoes everything below it.
 *
 * Each transfer is named by the path of its frame: "0" is the transaction itself, "0.2" its
 * third sub-call, "0.2.0" the first call inside that. The path depends only on the transaction's
 * execution, so it is the same on every read, and the transaction's own value is "0" whether it
 * came from a trace or from the transaction list: switching modes never credits a deposit twice.
 */

export interface CallFrame {
  type: string;
  from?: string;
  to?: string;
  value?: string;
  error?: string;
  calls?: CallFrame[];
}

export interface ValueTransfer {
  /** Recipient, lower-case hex. */
  to: string;
  valueWei: bigint;
  /** Path of the frame in the call tree. */
  position: string;
}

export const TOP_LEVEL_POSITION = "0";

const VALUE_FRAMES = new Set(["CALL", "SELFDESTRUCT"]);

/** Every value transfer in the trace that took effect, in execution order. */
export function valueTransfers(root: CallFrame): ValueTransfer[] {
  const found: ValueTransfer[] = [];
  // An explicit stack: a call tree can be 1,024 frames deep.
  const stack: { frame: CallFrame; position: string }[] = [{ frame: root, position: TOP_LEVEL_POSITION }];
  while (stack.length > 0) {
    const { frame, position } = stack.pop()!;
    // A reverted frame takes all its descendants with it: none of them is visited.
    if (frame.error !== undefined) continue;
    const valueWei = frame.value ? BigInt(frame.value) : 0n;
    if (VALUE_FRAMES.has(frame.type.toUpperCase()) && valueWei > 0n && frame.to) {
      found.push({ to: frame.to.toLowerCase(), valueWei, position });
    }
    const calls = frame.calls ?? [];
    for (let i = calls.length - 1; i >= 0; i--)
      stack.push({ frame: calls[i]!, position: `${position}.${i}` });
  }
  return found;
}

/** The transaction's own value, for RPCs without tracing; the caller checks that it succeeded. */
export function topLevelTransfer(tx: { to: string | null; value: bigint }): ValueTransfer | null {
  if (!tx.to || tx.value <= 0n) return null;
  return { to: tx.to.toLowerCase(), valueWei: tx.value, position: TOP_LEVEL_POSITION };
}

/**
 * The ledger reference of one crediting of a transfer. A transfer is named by `first`
 * (`<chainId>:<txHash>:<position>`, see store.ts). Its first crediting uses that name as it is,
 * so references written before reorganisations were handled keep their meaning. If a
 * reorganisation takes the credit back and the chain includes the transfer again, that crediting
 * is number `inclusion` (1, 2, …) and gets `:<inclusion>:<blockHash>` appended: the number keeps
 * it unique even when the chain returns to a block it had left, the hash says where it came from.
 */
export function creditReference(first: string, inclusion: number, blockHash: string): string {
  if (inclusion === 0) return first;
  if (!Number.isSafeInteger(inclusion) || inclusion < 0) throw new RangeError(`bad inclusion ${inclusion}`);
  return `${first}:${inclusion}:${blockHash.toLowerCase()}`;
}

/** The reference of the `reversal` entry that takes back a credit made from an orphaned block. */
export function reversalReference(creditReference: string, orphanedBlockHash: string): string {
  return `reorg:${creditReference}:${orphanedBlockHash.toLowerCase()}`;
}
