import type { Queryable } from "../db/db.ts";
import type { DepositDeriver } from "./derivation.ts";

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

const SELECT = `SELECT f.project_id, f.chain_id, f.address, f.created_at,
    COALESCE((SELECT sum(l.amount) FROM ledger_entries l
              WHERE l.project_id = f.project_id AND l.kind = 'deposit'
                AND l.reference LIKE f.chain_id || ':%'), 0)::text AS total_credited
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
