/**
 * The webhook tables (migrations/009_webhooks.sql): endpoints, per-project settings, deliveries
 * and their attempts. This module is their only writer; secrets are read here for signing and
 * never returned by the listing functions.
 *
 * Signing secrets are stored sealed (src/secrets/envelope.ts, migrations/018), each bound to its
 * row: an endpoint's to `webhook_endpoints:<id>`, an approval webhook's to
 * `project_webhook_settings:<project id>`. They are sealed here, before they reach SQL, and
 * opened only where a request is signed.
 */
import { Lru } from "../api-keys/lru.ts";
import type { Queryable } from "../db/db.ts";
import { projectTanks } from "../projects/store.ts";
import { type Keyring, OPEN_FAILURES, open, seal } from "../secrets/envelope.ts";
import type { SealedColumns } from "../secrets/reseal.ts";

export const MAX_ENDPOINTS_PER_PROJECT = 10;
/** The most events an endpoint may take in one request (migration 053 holds the same bound). */
export const MAX_EVENTS_PER_REQUEST = 100;
/** How long a rotated-out secret keeps signing beside the new one. */
export const PREVIOUS_SECRET_GRACE_HOURS = 24;

export interface Endpoint {
  id: number;
  url: string;
  event_types: string[];
  description: string;
  enabled: boolean;
  /** Events sent in one request at most (1: one event per request, the Standard Webhooks way). */
  max_events_per_request: number;
  created_at: string;
  updated_at: string;
}

const ENDPOINT_COLUMNS =
  "id, url, event_types, description, enabled, max_events_per_request, created_at, updated_at";

interface EndpointRow extends Omit<Endpoint, "created_at" | "updated_at"> {
  created_at: Date;
  updated_at: Date;
}

function toEndpoint(r: EndpointRow): Endpoint {
  return {
    id: r.id,
    url: r.url,
    event_types: r.event_types,
    description: r.description,
    enabled: r.enabled,
    max_events_per_request: r.max_events_per_request,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export async function listEndpoints(db: Queryable, projectId: string): Promise<Endpoint[]> {
  const rows = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE project_id = $1 ORDER BY id`,
    [projectId],
  );
  return rows.map(toEndpoint);
}

export async function getEndpoint(db: Queryable, projectId: string, id: number): Promise<Endpoint | null> {
  const rows = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE project_id = $1 AND id = $2`,
    [projectId, id],
  );
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/** What an endpoint's secrets are bound to: the row that holds them. */
export function endpointBinding(id: number | string): string {
  return `webhook_endpoints:${id}`;
}

/** What a project's approval secret is bound to. */
export function approvalBinding(projectId: string): string {
  return `project_webhook_settings:${projectId}`;
}

/** The columns of this module that hold sealed secrets (src/secrets/registry.ts lists every module's). */
export const WEBHOOK_SEALED_COLUMNS: readonly SealedColumns[] = [
  { table: "webhook_endpoints", key: "id", columns: ["secret", "previous_secret"], binding: endpointBinding },
  {
    table: "project_webhook_settings",
    key: "project_id",
    columns: ["approval_secret"],
    binding: approvalBinding,
  },
];

type OpenedSecret = { ok: true; secret: string } | { ok: false; why: string };

/**
 * Opens a secret read from a row. The reason a value cannot be opened is for logs (it never
 * includes the value).
 *
 * The same sealed value, binding and keyring always open alike, so each is opened once and kept
 * in a bounded LRU per keyring, not opened on every delivery and approval call that uses it (an
 * AES-GCM open is about 9 µs). A rotated or altered value is a new entry; a ring that cannot open
 * a value keeps failing to.
 */
export function openSecret(ring: Keyring, sealed: string, binding: string): OpenedSecret {
  let cache = openedByRing.get(ring);
  if (!cache) {
    cache = new Lru(OPENED_SECRETS_CACHED);
    openedByRing.set(ring, cache);
  }
  const key = `${binding}|${sealed}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const opened = open(ring, sealed, binding);
  const result: OpenedSecret = opened.ok
    ? { ok: true, secret: opened.plaintext }
    : { ok: false, why: OPEN_FAILURES[opened.reason] };
  cache.set(key, result);
  return result;
}

const OPENED_SECRETS_CACHED = 10_000;
const openedByRing = new WeakMap<Keyring, Lru<string, OpenedSecret>>();

/**
 * Adds an endpoint, or returns null when the project already has its maximum. The project row is
 * locked so that concurrent creations cannot overshoot the bound. The id is drawn first, so the
 * secret can be sealed bound to the row it goes into.
 */
export async function createEndpoint(
  tx: Queryable,
  ring: Keyring,
  e: {
    projectId: string;
    url: string;
    eventTypes: string[];
    description: string;
    maxEventsPerRequest: number;
    secret: string;
  },
): Promise<Endpoint | null> {
  await tx.query("SELECT id FROM projects WHERE id = $1 FOR UPDATE", [e.projectId]);
  const [{ n }] = (await tx.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM webhook_endpoints WHERE project_id = $1",
    [e.projectId],
  )) as [{ n: number }];
  if (n >= MAX_ENDPOINTS_PER_PROJECT) return null;
  const [{ id }] = (await tx.query<{ id: number }>(
    "SELECT nextval(pg_get_serial_sequence('webhook_endpoints', 'id')) AS id",
  )) as [{ id: number }];
  const rows = await tx.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (id, project_id, url, event_types, description, max_events_per_request, secret)
     OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${ENDPOINT_COLUMNS}`,
    [
      id,
      e.projectId,
      e.url,
      e.eventTypes,
      e.description,
      e.maxEventsPerRequest,
      seal(ring, e.secret, endpointBinding(id)),
    ],
  );
  return toEndpoint(rows[0]!);
}

export async function updateEndpoint(
  db: Queryable,
  projectId: string,
  id: number,
  change: {
    url?: string;
    eventTypes?: string[];
    description?: string;
    enabled?: boolean;
    maxEventsPerRequest?: number;
  },
): Promise<Endpoint | null> {
  const rows = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET url = COALESCE($3, url), event_types = COALESCE($4, event_types),
       description = COALESCE($5, description), enabled = COALESCE($6, enabled),
       max_events_per_request = COALESCE($7, max_events_per_request), updated_at = now()
     WHERE project_id = $1 AND id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
    [
      projectId,
      id,
      change.url ?? null,
      change.eventTypes ?? null,
      change.description ?? null,
      change.enabled ?? null,
      change.maxEventsPerRequest ?? null,
    ],
  );
  return rows[0] ? toEndpoint(rows[0]) : null;
}

/** Deletes the endpoint with its deliveries and their log. */
export async function deleteEndpoint(db: Queryable, projectId: string, id: number): Promise<boolean> {
  const rows = await db.query(
    "DELETE FROM webhook_endpoints WHERE project_id = $1 AND id = $2 RETURNING id",
    [projectId, id],
  );
  return rows.length > 0;
}

/**
 * Replaces the secret; the previous one keeps signing for PREVIOUS_SECRET_GRACE_HOURS. It moves
 * to previous_secret sealed as it was: both columns of a row share its binding.
 */
export async function rotateEndpointSecret(
  db: Queryable,
  ring: Keyring,
  projectId: string,
  id: number,
  secret: string,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE webhook_endpoints SET previous_secret = secret,
       previous_secret_until = now() + make_interval(hours => $4), secret = $3, updated_at = now()
     WHERE project_id = $1 AND id = $2 RETURNING id`,
    [projectId, id, seal(ring, secret, endpointBinding(id)), PREVIOUS_SECRET_GRACE_HOURS],
  );
  return rows.length > 0;
}

// Settings ----------------------------------------------------------------------------------

export type FailMode = "open" | "closed";

export interface ApprovalSettings {
  url: string;
  /** As stored: open it with openSecret and approvalBinding(projectId) to sign. */
  sealedSecret: string;
  timeoutMs: number;
  failMode: FailMode;
}

export interface ProjectWebhookSettings {
  /** The threshold of every chain that has none of its own. */
  lowBalanceThresholdWei: bigint | null;
  /** Chains with a threshold of their own (null: no alert on that chain), by chain id. */
  lowBalanceThresholds: Map<number, bigint | null>;
  approval: ApprovalSettings | null;
}

/** The threshold that applies to one chain's tank: its own, else the project's. */
export function thresholdOn(
  settings: Omit<ProjectWebhookSettings, "approval">,
  chainId: number,
): bigint | null {
  return settings.lowBalanceThresholds.has(chainId)
    ? settings.lowBalanceThresholds.get(chainId)!
    : settings.lowBalanceThresholdWei;
}

function thresholdsOf(json: Record<string, string | null> | null): Map<number, bigint | null> {
  return new Map(
    Object.entries(json ?? {}).map(([chain, v]) => [Number(chain), v === null ? null : BigInt(v)]),
  );
}

export async function readSettings(db: Queryable, projectId: string): Promise<ProjectWebhookSettings> {
  const rows = await db.query<{
    threshold: string | null;
    thresholds: Record<string, string | null>;
    url: string | null;
    secret: string | null;
    timeout_ms: number;
    fail_mode: FailMode;
  }>(
    `SELECT low_balance_threshold::text AS threshold, low_balance_thresholds AS thresholds,
       approval_url AS url, approval_secret AS secret,
       approval_timeout_ms AS timeout_ms, approval_fail_mode AS fail_mode
     FROM project_webhook_settings WHERE project_id = $1`,
    [projectId],
  );
  const r = rows[0];
  if (!r) return { lowBalanceThresholdWei: null, lowBalanceThresholds: new Map(), approval: null };
  return {
    lowBalanceThresholdWei: r.threshold === null ? null : BigInt(r.threshold),
    lowBalanceThresholds: thresholdsOf(r.thresholds),
    approval:
      r.url && r.secret
        ? { url: r.url, sealedSecret: r.secret, timeoutMs: r.timeout_ms, failMode: r.fail_mode }
        : null,
  };
}

/**
 * Sets the approval webhook. The secret is kept when one exists (a change of URL or timeout does
 * not invalidate the receiver's copy) unless `newSecret` is forced; returns the secret when it is
 * new, for the response to show once.
 */
export async function putApproval(
  tx: Queryable,
  ring: Keyring,
  projectId: string,
  a: { url: string; timeoutMs: number; failMode: FailMode },
  candidateSecret: string,
  rotate: boolean,
): Promise<{ secret: string | null }> {
  // Sealed with a fresh IV, so the sealed candidate is unique: equal to the stored value only
  // when it was the one kept.
  const sealed = seal(ring, candidateSecret, approvalBinding(projectId));
  const rows = await tx.query<{ fresh: boolean }>(
    `INSERT INTO project_webhook_settings AS s (project_id, approval_url, approval_secret, approval_timeout_ms, approval_fail_mode)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (project_id) DO UPDATE SET approval_url = EXCLUDED.approval_url,
       approval_secret = CASE WHEN $6 OR s.approval_secret IS NULL THEN EXCLUDED.approval_secret ELSE s.approval_secret END,
       approval_timeout_ms = EXCLUDED.approval_timeout_ms, approval_fail_mode = EXCLUDED.approval_fail_mode,
       updated_at = now()
     RETURNING approval_secret = $3 AS fresh`,
    [projectId, a.url, sealed, a.timeoutMs, a.failMode, rotate],
  );
  return { secret: rows[0]!.fresh ? candidateSecret : null };
}

export async function deleteApproval(db: Queryable, projectId: string): Promise<boolean> {
  const rows = await db.query(
    `UPDATE project_webhook_settings SET approval_url = NULL, approval_secret = NULL, updated_at = now()
     WHERE project_id = $1 AND approval_url IS NOT NULL RETURNING 1`,
    [projectId],
  );
  return rows.length > 0;
}

/**
 * Sets the low-balance threshold (null: none): one chain's own when `chainId` is given, else the
 * project's, which every chain without its own follows. A tank now below its threshold that was
 * not below it before is a crossing too: `balance.low` is emitted for it in the same transaction.
 */
export async function putLowBalanceThreshold(
  tx: Queryable,
  projectId: string,
  thresholdWei: bigint | null,
  chainId?: number,
): Promise<void> {
  // The project's row first, as every writer of its tanks does.
  const locked = await tx.query("SELECT 1 FROM projects WHERE id = $1 FOR UPDATE", [projectId]);
  if (locked.length === 0) return;
  const before = await readSettings(tx, projectId);
  const value = thresholdWei?.toString() ?? null;
  if (chainId === undefined) {
    await tx.query(
      `INSERT INTO project_webhook_settings AS s (project_id, low_balance_threshold) VALUES ($1, $2)
       ON CONFLICT (project_id) DO UPDATE SET low_balance_threshold = EXCLUDED.low_balance_threshold, updated_at = now()`,
      [projectId, value],
    );
  } else {
    await tx.query(
      `INSERT INTO project_webhook_settings AS s (project_id, low_balance_thresholds)
         VALUES ($1, jsonb_build_object($2::text, $3::text))
       ON CONFLICT (project_id) DO UPDATE SET
         low_balance_thresholds = s.low_balance_thresholds || jsonb_build_object($2::text, $3::text), updated_at = now()`,
      [projectId, String(chainId), value],
    );
  }
  const after = await readSettings(tx, projectId);
  for (const tank of await projectTanks(tx, projectId)) {
    const [old, now] = [thresholdOn(before, tank.chainId), thresholdOn(after, tank.chainId)];
    const wasBelow = old !== null && tank.balanceWei < old;
    if (now !== null && tank.balanceWei < now && !wasBelow) {
      await tx.query(
        `SELECT emit_event($1, 'balance.low',
           jsonb_build_object('chainId', $4::integer, 'balance', $2::text, 'threshold', $3::text))
         WHERE webhook_subscribed($1, 'balance.low')`,
        [projectId, tank.balanceWei.toString(), now.toString(), tank.chainId],
      );
    }
  }
}
