import type { Queryable } from "../db/db.ts";
import type { NamedFunction } from "./abi.ts";

/** The `contract_abis` table (migrations/028_contract_abis.sql): this module is its one writer. */
export interface ContractRecord {
  address: string;
  name: string | null;
  functions: NamedFunction[];
  created_at: string;
  updated_at: string;
}

/** The most contracts a project names. */
export const MAX_CONTRACTS_PER_PROJECT = 100;

const COLUMNS = "address, name, functions, created_at, updated_at";

export async function listContracts(db: Queryable, projectId: string): Promise<ContractRecord[]> {
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM contract_abis WHERE project_id = $1 ORDER BY address`,
    [projectId],
  );
  return rows.map(toRecord);
}

/**
 * Stores (or replaces) a contract's name and functions, inside the caller's transaction; null
 * when the project already names its maximum of contracts. The project row is locked so that
 * concurrent uploads cannot overshoot the bound.
 */
export async function putContract(
  tx: Queryable,
  projectId: string,
  address: string,
  name: string | null,
  functions: NamedFunction[],
): Promise<{ record: ContractRecord; created: boolean } | null> {
  await tx.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  const [count] = await tx.query<{ n: number; mine: boolean }>(
    `SELECT count(*)::int AS n, bool_or(address = $2) AS mine FROM contract_abis WHERE project_id = $1`,
    [projectId, address],
  );
  const created = !count?.mine;
  if (created && (count?.n ?? 0) >= MAX_CONTRACTS_PER_PROJECT) return null;
  const [row] = await tx.query<Row>(
    `INSERT INTO contract_abis AS c (project_id, address, name, functions) VALUES ($1, $2, $3, $4::jsonb)
     ON CONFLICT (project_id, address) DO UPDATE SET name = EXCLUDED.name, functions = EXCLUDED.functions,
       updated_at = now()
     RETURNING ${COLUMNS}`,
    [projectId, address, name, JSON.stringify(functions)],
  );
  return { record: toRecord(row!), created };
}

export async function deleteContract(
  db: Queryable,
  projectId: string,
  address: string,
): Promise<ContractRecord | null> {
  const rows = await db.query<Row>(
    `DELETE FROM contract_abis WHERE project_id = $1 AND address = $2 RETURNING ${COLUMNS}`,
    [projectId, address],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

interface Row {
  address: string;
  name: string | null;
  functions: NamedFunction[];
  created_at: Date;
  updated_at: Date;
}

function toRecord(r: Row): ContractRecord {
  return {
    address: r.address,
    name: r.name,
    functions: r.functions,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}
