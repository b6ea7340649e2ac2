import type { Queryable } from "../db/db.ts";
import { apiKeyDigest, apiKeyPreview, generateApiKey, type Scope } from "./format.ts";

export interface ApiKeyRecord {
  id: number;
  name: string | null;
  key_preview: string;
  rate_limit: number;
  scopes: Scope[];
  issued_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const COLUMNS = "id, name, key_preview, rate_limit, scopes, issued_at, last_used_at, revoked_at";

export async function createApiKey(
  db: Queryable,
  projectId: string,
  rateLimit: number,
  scopes: Scope[],
  name: string | null = null,
): Promise<{ apiKey: string; record: ApiKeyRecord }> {
  const apiKey = generateApiKey();
  const rows = await db.query<Row>(
    `INSERT INTO api_keys (project_id, digest, key_preview, rate_limit, scopes, name)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
    [projectId, apiKeyDigest(apiKey), apiKeyPreview(apiKey), rateLimit, scopes, name],
  );
  return { apiKey, record: toRecord(rows[0]!) };
}

export async function listApiKeys(db: Queryable, projectId: string): Promise<ApiKeyRecord[]> {
  const rows = await db.query<Row>(`SELECT ${COLUMNS} FROM api_keys WHERE project_id = $1 ORDER BY id`, [
    projectId,
  ]);
  return rows.map(toRecord);
}

/** Revokes a key of the project; false when there is no such key. Revoking twice is harmless. */
export async function revokeApiKey(
  db: Queryable,
  projectId: string,
  keyId: number,
): Promise<ApiKeyRecord | null> {
  const rows = await db.query<Row>(
    `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now())
     WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, keyId],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

/** Renames a key of the project (null removes the name); null when there is no such key. */
export async function renameApiKey(
  db: Queryable,
  projectId: string,
  keyId: number,
  name: string | null,
): Promise<ApiKeyRecord | null> {
  const rows = await db.query<Row>(
    `UPDATE api_keys SET name = $3 WHERE project_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [projectId, keyId, name],
  );
  return rows[0] ? toRecord(rows[0]) : null;
}

export interface ActiveKey {
  id: number;
  projectId: string;
  rateLimit: number;
  scopes: Scope[];
}

export async function findActiveKey(db: Queryable, digest: string): Promise<ActiveKey | null> {
  const rows = await db.query<{ id: number; project_id: string; rate_limit: number; scopes: Scope[] }>(
    "SELECT id, project_id, rate_limit, scopes FROM api_keys WHERE digest = $1 AND revoked_at IS NULL",
    [digest],
  );
  const row = rows[0];
  return row
    ? { id: row.id, projectId: row.project_id, rateLimit: row.rate_limit, scopes: row.scopes }
    : null;
}

export async function touchApiKeys(db: Queryable, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query("UPDATE api_keys SET last_used_at = now() WHERE id = ANY($1::bigint[])", [ids]);
}

interface Row {
  id: number;
  name: string | null;
  key_preview: string;
  rate_limit: number;
  scopes: Scope[];
  issued_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

function toRecord(row: Row): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    key_preview: row.key_preview,
    rate_limit: row.rate_limit,
    scopes: row.scopes,
    issued_at: row.issued_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
  };
}
