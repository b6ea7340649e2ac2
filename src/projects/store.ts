import type { Queryable } from "../db/db.ts";
import type { DepositDeriver } from "../funding/derivation.ts";
import { insertFundingAccount, nextDepositAddress } from "../funding/store.ts";
import type { ProjectSponsorTerms } from "../sponsor/policy.ts";
import type { UnknownAccounts } from "../sponsor/sender-code.ts";

export interface ProjectRecord {
  id: string;
  name: string;
  owner: string;
  organization_id: number;
  deposit_address: string;
  gas_tank_balance: string;
  /** The chain whose tank is gas_tank_balance and whose funding address is deposit_address. */
  home_chain_id: number;
  daily_cap: string | null;
  validity_ttl_sec: number;
  /** Shown to wallets as the sponsor's icon (ERC-7677); a https URL or a data:image URI. */
  sponsor_icon: string | null;
  /** Senders whose code the service does not know: refused, or sponsored on cost caps alone. */
  unknown_accounts: UnknownAccounts;
  created_at: string;
}

export type ProjectListItem = Pick<
  ProjectRecord,
  "id" | "name" | "deposit_address" | "gas_tank_balance" | "created_at"
>;

const COLUMNS =
  "id, name, owner, org_id, deposit_address, gas_tank_balance, home_chain_id, daily_cap, validity_ttl_sec, sponsor_icon, unknown_accounts, created_at";

/**
 * Creates a project and its funding account on its home chain in one transaction: the deposit
 * address is the next BIP-32 child of the deposit key. Returns null when the id is taken.
 */
export async function insertProject(
  tx: Queryable,
  deriver: DepositDeriver,
  p: { id: string; name: string; owner: string; orgId: number; homeChainId: number },
): Promise<ProjectRecord | null> {
  const taken = await tx.query("SELECT 1 FROM projects WHERE id = $1", [p.id]);
  if (taken.length > 0) return null;
  const deposit = await nextDepositAddress(tx, deriver);
  const rows = await tx.query<Row>(
    `INSERT INTO projects (id, org_id, owner, name, deposit_address, home_chain_id) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (id) DO NOTHING RETURNING ${COLUMNS}`,
    [p.id, p.orgId, p.owner, p.name, deposit.address, p.homeChainId],
  );
  if (!rows[0]) return null;
  await insertFundingAccount(tx, p.id, p.homeChainId, deposit);
  return toRecord(rows[0]);
}

/** Projects of the organization (for its quota; count under the organization's lock). */
export async function countProjectsOf(tx: Queryable, orgId: number): Promise<number> {
  const rows = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM projects WHERE org_id = $1", [
    orgId,
  ]);
  return rows[0]!.n;
}

/**
 * The project's gas tank on every chain it has one (migration 035): the home chain's first (the
 * project's row, always there), then the others by chain id. Wei as bigint.
 */
export async function projectTanks(
  db: Queryable,
  id: string,
): Promise<{ chainId: number; balanceWei: bigint }[]> {
  const rows = await db.query<{ chain_id: number; balance: string }>(
    `SELECT chain_id, balance::text AS balance FROM project_tanks WHERE project_id = $1
     ORDER BY home DESC, chain_id`,
    [id],
  );
  return rows.map((r) => ({ chainId: r.chain_id, balanceWei: BigInt(r.balance) }));
}

export async function getProject(db: Queryable, id: string): Promise<ProjectRecord | null> {
  const rows = await db.query<Row>(`SELECT ${COLUMNS} FROM projects WHERE id = $1`, [id]);
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Projects visible to a developer (through their organizations) or to one API key. */
export async function listProjects(
  db: Queryable,
  who: { developerId: number } | { projectId: string },
): Promise<ProjectListItem[]> {
  const rows =
    "developerId" in who
      ? await db.query<Row>(
          `SELECT ${COLUMNS.split(", ")
            .map((c) => `p.${c}`)
            .join(", ")} FROM projects p JOIN org_members m ON m.org_id = p.org_id
           WHERE m.developer_id = $1 ORDER BY p.created_at, p.id LIMIT 1000`,
          [who.developerId],
        )
      : await db.query<Row>(`SELECT ${COLUMNS} FROM projects WHERE id = $1`, [who.projectId]);
  return rows.map((r) => {
    const { id, name, deposit_address, gas_tank_balance, created_at } = toRecord(r);
    return { id, name, deposit_address, gas_tank_balance, created_at };
  });
}

export interface ProjectPatch {
  name?: string;
  dailyCapWei?: bigint | null;
  validityTtlSec?: number;
  sponsorIcon?: string | null;
  unknownAccounts?: UnknownAccounts;
}

export async function updateProject(
  db: Queryable,
  id: string,
  patch: ProjectPatch,
): Promise<ProjectRecord | null> {
  const sets: string[] = [];
  const params: unknown[] = [id];
  const set = (column: string, value: unknown) => {
    params.push(value);
    sets.push(`${column} = $${params.length}`);
  };
  if (patch.name !== undefined) set("name", patch.name);
  if (patch.dailyCapWei !== undefined) set("daily_cap", patch.dailyCapWei?.toString() ?? null);
  if (patch.validityTtlSec !== undefined) set("validity_ttl_sec", patch.validityTtlSec);
  if (patch.sponsorIcon !== undefined) set("sponsor_icon", patch.sponsorIcon);
  if (patch.unknownAccounts !== undefined) set("unknown_accounts", patch.unknownAccounts);
  if (sets.length === 0) return getProject(db, id);
  const rows = await db.query<Row>(
    `UPDATE projects SET ${sets.join(", ")} WHERE id = $1 RETURNING ${COLUMNS}`,
    params,
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

interface Row {
  id: string;
  name: string;
  owner: string;
  org_id: number;
  deposit_address: string;
  gas_tank_balance: string;
  home_chain_id: number;
  daily_cap: string | null;
  validity_ttl_sec: number;
  sponsor_icon: string | null;
  unknown_accounts: UnknownAccounts;
  created_at: Date;
}

function toRecord(r: Row): ProjectRecord {
  return {
    id: r.id,
    name: r.name,
    owner: r.owner,
    organization_id: r.org_id,
    deposit_address: r.deposit_address,
    gas_tank_balance: String(r.gas_tank_balance),
    home_chain_id: r.home_chain_id,
    daily_cap: r.daily_cap === null ? null : String(r.daily_cap),
    validity_ttl_sec: r.validity_ttl_sec,
    sponsor_icon: r.sponsor_icon,
    unknown_accounts: r.unknown_accounts,
    created_at: r.created_at.toISOString(),
  };
}

/**
 * What sponsoring reads of a project: its name and icon (shown to wallets), the validity TTL and
 * the unknown-account setting. The one place this is read (the tank is the reservation's to
 * decide); a project that does not exist reads as nameless, refusing unknown accounts.
 */
export async function readSponsorTerms(db: Queryable, projectId: string): Promise<ProjectSponsorTerms> {
  const rows = await db.query<{
    name: string;
    icon: string | null;
    ttl: number;
    unknown_accounts: UnknownAccounts;
  }>(
    "SELECT name, sponsor_icon AS icon, validity_ttl_sec AS ttl, unknown_accounts FROM projects WHERE id = $1",
    [projectId],
  );
  const r = rows[0];
  return r
    ? {
        name: r.name,
        icon: r.icon,
        ttlSec: r.ttl,
        unknownAccounts: r.unknown_accounts,
      }
    : { name: "", icon: null, ttlSec: DEFAULT_VALIDITY_TTL_SEC, unknownAccounts: "refuse" };
}

/** A new project's validity TTL (the column's default). */
export const DEFAULT_VALIDITY_TTL_SEC = 300;

/** The project's home chain (migration 035), the chain its figures and entries are for when no chain is named; null when it does not exist. */
export async function homeChainOf(db: Queryable, projectId: string): Promise<number | null> {
  const rows = await db.query<{ chain: number }>(
    "SELECT home_chain_id AS chain FROM projects WHERE id = $1",
    [projectId],
  );
  return rows[0]?.chain ?? null;
}
