import type { Queryable } from "../db/db.ts";
import { readCursor, type WatcherName } from "./cursors.ts";
import type { ChainClient } from "./rpc.ts";

/**
 * Where a watcher starts when it has no cursor and no configured start block. Starting at the
 * head would miss what happened before the watcher first reached the RPC (a deposit sent while
 * the RPC was down at first boot, an operation that landed meanwhile), so it starts at the last
 * block older than the earliest record that could have an effect on chain. Re-reading blocks is
 * harmless: every effect applies at most once.
 */
export async function initialBlock(
  client: ChainClient,
  head: bigint,
  sinceSec: number | null,
): Promise<bigint> {
  if (sinceSec === null) return head;
  return lastBlockAtOrBefore(client, head, sinceSec - SLACK_SEC);
}

/** Clock skew between the service and the chain. */
const SLACK_SEC = 120;

/** Binary search over block timestamps: about log2(head) block reads, once per watcher. */
export async function lastBlockAtOrBefore(
  client: ChainClient,
  head: bigint,
  timestampSec: number,
): Promise<bigint> {
  const at = async (n: bigint) => Number((await client.getBlock({ blockNumber: n })).timestamp);
  if ((await at(head)) <= timestampSec) return head;
  let lo = 0n;
  let hi = head;
  // Invariant: block `hi` is newer than the timestamp; the answer lies in [lo, hi).
  while (hi - lo > 1n) {
    const mid = (lo + hi) / 2n;
    if ((await at(mid)) <= timestampSec) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** The earliest authorization still pending on the chain (its valid_after), if any. */
export async function earliestPendingSec(db: Queryable, chainId: number): Promise<number | null> {
  const rows = await db.query<{ t: string | null }>(
    "SELECT min(valid_after)::text AS t FROM sponsorship_status_index WHERE chain_id = $1 AND status = 'pending'",
    [chainId],
  );
  return rows[0]?.t ? Number(rows[0].t) : null;
}

/** When the first funding address on the chain was handed out, if any. */
export async function earliestFundingSec(db: Queryable, chainId: number): Promise<number | null> {
  const rows = await db.query<{ t: string | null }>(
    "SELECT floor(extract(epoch FROM min(created_at)))::bigint::text AS t FROM funding_accounts WHERE chain_id = $1",
    [chainId],
  );
  return rows[0]?.t ? Number(rows[0].t) : null;
}

/**
 * The next block range a watcher reads: from its cursor (or, on its very first run, the start
 * block or the look-back above) up to `maxBlocks` blocks, never past the confirmed head.
 */
export async function nextBlockRange(input: {
  db: Queryable;
  client: ChainClient;
  chainId: number;
  watcher: WatcherName;
  head: bigint;
  maxBlocks: bigint;
  startBlock?: bigint | null;
  /** The time before which nothing on chain can matter to this watcher, for its first run. */
  since: () => Promise<number | null>;
}): Promise<{ fromBlock: bigint; toBlock: bigint } | null> {
  const { db, client, chainId, head, maxBlocks } = input;
  const fromBlock =
    (await readCursor(db, chainId, input.watcher)) ??
    input.startBlock ??
    (await initialBlock(client, head, await input.since()));
  if (fromBlock > head) return null;
  const last = fromBlock + maxBlocks - 1n;
  return { fromBlock, toBlock: last < head ? last : head };
}
