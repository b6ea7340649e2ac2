import { openDb } from "../src/db/index.ts";
import { localIssuer } from "../src/identity/tokens.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";

/**
 * Seeds one funded project through the public API, as a studio would: organization, project,
 * API key, allowlist entry. The gas tank has no HTTP route for credits (deposits come from the
 * chain), so the tank is funded with the ledger's own domain function on the same database.
 */

export interface Seeded {
  projectId: string;
  apiKey: string;
  target: string;
  selector: string;
}

export const BENCH_TARGET = "0x1000000000000000000000000000000000000b0b";
export const BENCH_SELECTOR = "0xa0712d68";
/** Far more than any run can reserve (150,000 gas × 200 gwei × a million requests ≈ 3·10^22). */
export const TANK_WEI = 10n ** 30n;

export async function seedProject(baseUrl: string, dataDir: string, runId: string): Promise<Seeded> {
  // The service created its local issuer key in DATA_DIR at start-up; sign a token with it.
  const issuer = await localIssuer(dataDir);
  const token = await issuer.issue(`bench-${runId}@example.com`, 3600);
  const call = async (method: string, path: string, body: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const slug = `bench-${runId}`;
  const projectId = `bench-${runId}`;
  await call("POST", "/orgs", { name: `Bench ${runId}`, slug });
  await call("POST", "/projects", { id: projectId, name: `Bench ${runId}`, owner: slug });
  // The senders are addresses with no code on the bench's anvil: the project sponsors unknown
  // accounts on caps alone, so every authorization still resolves the sender's code (the first
  // time through the chain, then from the resolver's cache, as a known account's does) and goes
  // on to be signed, instead of being refused as account_not_supported.
  await call("PATCH", `/projects/${projectId}`, { unknownAccounts: "caps_only" });
  const key = await call("POST", `/projects/${projectId}/apikeys`, { rateLimit: 1_000_000 });
  await call("POST", `/projects/${projectId}/allowlist`, {
    targetContract: BENCH_TARGET,
    functionSelector: BENCH_SELECTOR,
  });
  return { projectId, apiKey: String(key.apiKey), target: BENCH_TARGET, selector: BENCH_SELECTOR };
}

/**
 * Credits the tank. With PostgreSQL this runs beside the live service; PGlite is single-process,
 * so the caller stops the service first and this opens the same data directory.
 */
export async function fundProject(
  store: { databaseUrl: string | null; dataDir: string },
  projectId: string,
  runId: string,
): Promise<void> {
  const db = await openDb(store);
  try {
    await creditDeposit(db, { projectId, reference: `bench:${runId}`, amountWei: TANK_WEI });
  } finally {
    await db.close();
  }
}
