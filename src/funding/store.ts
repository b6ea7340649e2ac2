import type { Queryable } from "../db/db.ts";
import type { DepositDeriver } from "./derivation.ts";
import { creditReference } from "./transfers.ts";

export interface FundingAccount {
  project_id: string;
  chain_id: number;
  address: string;
  created_at: string;
  total_credited: string;
}

/** Deposit ledger references start with the chain id: `<chainId>:<txHash>:<position>`. */
export function depositReference(chainId: number, txHash: string, position: string | number): string {
  return `${chainId}:${txHash.toLowerCase()}:${position}`;
}

// Credited net of what reorganisations took back (chain_deposits.reversed).
const SELECT = `SELECT f.project_id, f.chain_id, f.address, f.created_at,
    (COALESCE((SELECT sum(l.amount) FROM ledger_entries l
               WHERE l.project_id = f.project_id AND l.kind = 'deposit'
                 AND l.chain_id = f.chain_id), 0)
     - COALESCE((SELECT sum(d.reversed) FROM chain_deposits d
                 WHERE d.project_id = f.project_id AND d.chain_id = f.chain_id AND d.orphaned_at IS NOT NULL), 0)
    )::text AS total_credited
  FROM funding_accounts f`;

export async function listFundingAccounts(db: Queryable, projectId: string): Promise<FundingAccount[]> {
  const rows = await db.query<Row>(`${SELECT} WHERE f.project_id = $1 ORDER BY f.chain_id`, [projectId]);
  return rows.map(toAccount);
}

/** Takes the next BIP-32 index of the deposit key and derives its address. */
export async function nextDepositAddress(
  tx: Queryable,
  deriver: DepositDeriver,
): Promise<{ index: number; address: string }> {
  const rows = await tx.query<{ index: number }>("SELECT nextval('funding_derivation_index')::int AS index");
  const index = rows[0]!.index;
  return { index, address: deriver.addressAt(index) };
}

export async function insertFundingAccount(
  tx: Queryable,
  projectId: string,
  chainId: number,
  deposit: { index: number; address: string },
): Promise<void> {
  await tx.query(
    "INSERT INTO funding_accounts (project_id, chain_id, address, derivation_index) VALUES ($1, $2, $3, $4)",
    [projectId, chainId, deposit.address, deposit.index],
  );
}

/** The project's address on the chain, derived from the next BIP-32 index on first request. */
export async function provisionFundingAccount(
  tx: Queryable,
  deriver: DepositDeriver,
  projectId: string,
  chainId: number,
): Promise<FundingAccount> {
  const find = async () => {
    const rows = await tx.query<Row>(`${SELECT} WHERE f.project_id = $1 AND f.chain_id = $2`, [
      projectId,
      chainId,
    ]);
    return rows[0] ? toAccount(rows[0]) : null;
  };
  const existing = await find();
  if (existing) return existing;
  // Serialise provisioning per project so two first calls cannot take two indexes.
  await tx.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  const raced = await find();
  if (raced) return raced;
  await insertFundingAccount(tx, projectId, chainId, await nextDepositAddress(tx, deriver));
  return (await find())!;
}

interface Row {
  project_id: string;
  chain_id: number;
  address: string;
  created_at: Date;
  total_credited: string;
}

function toAccount(r: Row): FundingAccount {
  return { ...r, created_at: r.created_at.toISOString() };
}

// Credits by block (chain_deposits): which block each credit came from, so that a reorganisation
// that replaces the block can take the credit back (see deposit-watcher.ts). Written only here.

export interface ChainDeposit {
  chainId: number;
  txHash: string;
  /** The transfer's frame path in its transaction's call tree. */
  position: string;
  blockNumber: bigint;
  blockHash: string;
  projectId: string;
  address: string;
  amountWei: bigint;
}

export type RecordedDeposit =
  /** A new crediting of the transfer: credit it under `reference`. */
  | { kind: "new"; reference: string; inclusion: number }
  /** The transfer already has a live credit, from `blockHash` (null when another instance raced us). */
  | { kind: "known"; blockHash: string | null };

/**
 * Records a transfer read from a block, unless it already has a live (not orphaned) credit. The
 * first crediting of a transfer keeps the reference `<chainId>:<txHash>:<position>`, so every
 * reference written before blocks were tracked stays valid (and a pre-existing credit under it is
 * recognised by the ledger); a crediting after a reorganisation took the earlier one back gets
 * its inclusion number and block hash appended (see creditReference in transfers.ts).
 */
export async function recordChainDeposit(tx: Queryable, d: ChainDeposit): Promise<RecordedDeposit> {
  const key = [d.chainId, d.txHash.toLowerCase(), d.position];
  const counted = await tx.query<{ n: number; live: string | null }>(
    `SELECT count(*)::int AS n, max(block_hash) FILTER (WHERE orphaned_at IS NULL) AS live
     FROM chain_deposits WHERE chain_id = $1 AND tx_hash = $2 AND frame_path = $3`,
    key,
  );
  const { n: inclusion, live } = counted[0]!;
  if (live !== null) return { kind: "known", blockHash: live };
  const blockHash = d.blockHash.toLowerCase();
  const reference = creditReference(depositReference(d.chainId, d.txHash, d.position), inclusion, blockHash);
  const inserted = await tx.query(
    `INSERT INTO chain_deposits (chain_id, tx_hash, frame_path, inclusion, block_number, block_hash,
       project_id, address, amount, reference)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING RETURNING inclusion`,
    [
      ...key,
      inclusion,
      d.blockNumber.toString(),
      blockHash,
      d.projectId,
      d.address,
      d.amountWei.toString(),
      reference,
    ],
  );
  return inserted.length > 0 ? { kind: "new", reference, inclusion } : { kind: "known", blockHash: null };
}

export interface LiveDeposit {
  txHash: string;
  position: string;
  inclusion: number;
  blockHash: string;
  projectId: string;
  amountWei: bigint;
  reference: string;
}

interface LiveRow {
  tx_hash: string;
  frame_path: string;
  inclusion: number;
  block_hash: string;
  project_id: string;
  amount: string;
  reference: string;
}

const LIVE_COLUMNS = "tx_hash, frame_path, inclusion, block_hash, project_id, amount::text, reference";

function toLive(r: LiveRow): LiveDeposit {
  return {
    txHash: r.tx_hash,
    position: r.frame_path,
    inclusion: r.inclusion,
    blockHash: r.block_hash,
    projectId: r.project_id,
    amountWei: BigInt(r.amount),
    reference: r.reference,
  };
}

/** Live credits that came from the given blocks, in the order they were credited. */
export async function liveDepositsIn(
  q: Queryable,
  chainId: number,
  blockHashes: string[],
): Promise<LiveDeposit[]> {
  if (blockHashes.length === 0) return [];
  const rows = await q.query<LiveRow>(
    `SELECT ${LIVE_COLUMNS} FROM chain_deposits
     WHERE chain_id = $1 AND block_hash = ANY($2::text[]) AND orphaned_at IS NULL
     ORDER BY created_at, tx_hash, frame_path`,
    [chainId, blockHashes.map((h) => h.toLowerCase())],
  );
  return rows.map(toLive);
}

/** Locks a credit for orphaning; null when it is already orphaned. */
export async function lockLiveDeposit(
  tx: Queryable,
  chainId: number,
  d: LiveDeposit,
): Promise<LiveDeposit | null> {
  const rows = await tx.query<LiveRow>(
    `SELECT ${LIVE_COLUMNS} FROM chain_deposits
     WHERE chain_id = $1 AND tx_hash = $2 AND frame_path = $3 AND inclusion = $4 AND orphaned_at IS NULL
     FOR UPDATE`,
    [chainId, d.txHash, d.position, d.inclusion],
  );
  return rows[0] ? toLive(rows[0]) : null;
}

/** Marks a locked credit as taken back by reorganisation `reorgId`, which reversed `reversedWei` of it. */
export async function markDepositOrphaned(
  tx: Queryable,
  chainId: number,
  d: LiveDeposit,
  reorgId: number,
  reversedWei: bigint,
): Promise<void> {
  await tx.query(
    `UPDATE chain_deposits SET orphaned_at = now(), reorg_id = $5, reversed = $6
     WHERE chain_id = $1 AND tx_hash = $2 AND frame_path = $3 AND inclusion = $4 AND orphaned_at IS NULL`,
    [chainId, d.txHash, d.position, d.inclusion, reorgId, reversedWei.toString()],
  );
}

/** What reorganisation `reorgId` took back from deposits, and what it could not (per project). */
export async function orphanedDepositTotals(
  q: Queryable,
  reorgId: number,
): Promise<{
  compensations: number;
  reversedWei: bigint;
  shortfalls: { projectId: string; shortfallWei: bigint }[];
}> {
  const rows = await q.query<{ project_id: string; n: number; reversed: string; shortfall: string }>(
    `SELECT project_id, count(*)::int AS n, sum(reversed)::text AS reversed, sum(amount - reversed)::text AS shortfall
     FROM chain_deposits WHERE reorg_id = $1 GROUP BY project_id ORDER BY project_id`,
    [reorgId],
  );
  return {
    compensations: rows.reduce((sum, r) => sum + r.n, 0),
    reversedWei: rows.reduce((sum, r) => sum + BigInt(r.reversed), 0n),
    shortfalls: rows
      .filter((r) => BigInt(r.shortfall) > 0n)
      .map((r) => ({ projectId: r.project_id, shortfallWei: BigInt(r.shortfall) })),
  };
}

// Deposit history: every deposit entry of the ledger (the record of what was credited), with the
// block it came from when the deposit watcher recorded one (chain_deposits, joined by reference).
// A credit a reorganisation took back stays in the history, marked reversed, so the listing
// still adds up to the ledger's entries.

export interface DepositRecord {
  id: number;
  chain_id: number;
  tx_hash: string | null;
  block_number: number | null;
  amount: string;
  credited_at: string;
  status: "credited" | "reversed";
  reversed_amount: string;
  reversed_at: string | null;
}

export interface DepositsPage {
  deposits: DepositRecord[];
  nextCursor?: string;
}

/** Opaque to clients: the ledger entry id of the last deposit of the page, newest first. */
export function encodeDepositCursor(id: number): string {
  return Buffer.from(`d1:${id}`).toString("base64url");
}

/** The entry id a cursor continues after, or null when it is not one this service issued. */
export function decodeDepositCursor(cursor: string): number | null {
  const m = /^d1:([1-9][0-9]{0,15})$/.exec(Buffer.from(cursor, "base64url").toString("utf8"));
  // Only the exact encoding counts: base64url decoding skips characters it does not know.
  return m && encodeDepositCursor(Number(m[1])) === cursor ? Number(m[1]) : null;
}

// A reference written by the deposit watcher is `<chainId>:<txHash>:<position>[...]`; credits
// made another way (operator top-ups, tests) have no chain transfer to show.
const WATCHED_REFERENCE = /^([0-9]{1,10}):(0x[0-9a-f]{64}):/;

interface DepositRow {
  id: string;
  chain_id: number;
  reference: string;
  amount: string;
  created_at: Date;
  block_number: string | null;
  orphaned_at: Date | null;
  reversed: string | null;
}

/** One page of the project's credited deposits, newest first, by keyset on the ledger entry id. */
export async function listDeposits(
  q: Queryable,
  projectId: string,
  page: { limit: number; afterId: number | null },
): Promise<DepositsPage> {
  const rows = await q.query<DepositRow>(
    `SELECT l.id, l.chain_id, l.reference, l.amount::text AS amount, l.created_at,
       d.block_number::text AS block_number, d.orphaned_at, d.reversed::text AS reversed
     FROM ledger_entries l LEFT JOIN chain_deposits d ON d.reference = l.reference
     WHERE l.project_id = $1 AND l.kind = 'deposit' AND ($2::bigint IS NULL OR l.id < $2::bigint)
     ORDER BY l.id DESC LIMIT $3`,
    [projectId, page.afterId, page.limit + 1],
  );
  const more = rows.length > page.limit;
  const shown = more ? rows.slice(0, page.limit) : rows;
  return {
    deposits: shown.map(toDeposit),
    ...(more ? { nextCursor: encodeDepositCursor(Number(shown[shown.length - 1]!.id)) } : {}),
  };
}

function toDeposit(r: DepositRow): DepositRecord {
  const watched = WATCHED_REFERENCE.exec(r.reference);
  return {
    id: Number(r.id),
    // The tank the credit went to (every entry names its chain, migration 035).
    chain_id: r.chain_id,
    tx_hash: watched ? watched[2]! : null,
    block_number: r.block_number === null ? null : Number(r.block_number),
    amount: r.amount,
    credited_at: r.created_at.toISOString(),
    status: r.orphaned_at ? "reversed" : "credited",
    reversed_amount: r.reversed ?? "0",
    reversed_at: r.orphaned_at ? r.orphaned_at.toISOString() : null,
  };
}
