import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { readFile, rename, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { pino } from "pino";
import type { Hex } from "viem";
import { IMPLEMENTATION_RULES } from "../../src/accounts/code/implementations.ts";
import type { SenderCodeResolver } from "../../src/accounts/code/resolve.ts";
import { buildApp } from "../../src/app.ts";
import { type FeeLevels, type FeeOracle, fixedFeeOracle } from "../../src/chains/fee-oracle.ts";
import type { ChainClient } from "../../src/chains/rpc.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import type { Services } from "../../src/context.ts";
import type { Db } from "../../src/db/db.ts";
import { migrate } from "../../src/db/migrate.ts";
import { dumpPglite, openPglite } from "../../src/db/pglite.ts";
import { openPostgres } from "../../src/db/postgres.ts";
import { type LocalIssuer, localIssuer } from "../../src/identity/tokens.ts";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { ZERO_HASH } from "../../src/paymaster/layout.ts";
import { logOptions } from "../../src/process/log.ts";
import { wireServices } from "../../src/services.ts";
import type { ChainOperation } from "../../src/settlement/scan.ts";
import {
  type ScannedRange,
  type SettlementWatcher,
  type SettlementWatcherOptions,
  settlementWatcher,
} from "../../src/settlement/watcher.ts";
import { assertEventsMatchRegistry } from "./events.ts";
import { responseValidator } from "./openapi.ts";

/** A fixed paymaster address for tests that sign but never go on chain. */
export const TEST_PAYMASTER = "0x00000000000000000000000000000000000000aa";

/** The second chain of the tests of money per chain: "Local", paid in LOC, its paymaster this address. */
export const OTHER_CHAIN = 31337;
export const OTHER_PAYMASTER = "0x00000000000000000000000000000000000000bb";

/**
 * Settings serving 14601 and OTHER_CHAIN, with no node behind the second (its RPC refuses), for
 * tests that move money through the ledger; `extra` adds or replaces settings.
 */
export function twoChainsEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    CHAINS: `14601,${OTHER_CHAIN}`,
    [`CHAIN_${OTHER_CHAIN}_NAME`]: "Local",
    [`CHAIN_${OTHER_CHAIN}_RPC_URL`]: "http://127.0.0.1:9",
    [`CHAIN_${OTHER_CHAIN}_CURRENCY_SYMBOL`]: "LOC",
    [`CHAIN_${OTHER_CHAIN}_PAYMASTER_ADDRESS`]: OTHER_PAYMASTER,
    ...extra,
  };
}
export const TEST_SIGNER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
/** One secrets key for every test app, so that apps sharing a store open each other's secrets. */
export const TEST_SECRETS_KEY = "dGVzdCBrZXkgb2YgdGhlIHNlY3JldHMgYXQgcmVzdCE";
/** The fees a test app sees unless it reads a chain's: 1 gwei of base fee, 1 gwei of priority fee. */
export const TEST_FEES: FeeLevels = {
  baseFeePerGasWei: 1_000_000_000n,
  priorityFeePerGasWei: 1_000_000_000n,
};

export interface TestDb {
  db: Db;
  schema: string | null;
  drop(): Promise<void>;
}

/**
 * A fresh store for one test file: an in-memory PGlite, or (with DATABASE_URL) a schema of its
 * own in the real PostgreSQL, dropped afterwards. Migrations are applied: all of them, or with
 * `until` those up to that file and no functions (yesterday's schema, for a migration's test).
 */
export async function openTestDb(options: { until?: string } = {}): Promise<TestDb> {
  const url = process.env.DATABASE_URL;
  if (options.until !== undefined) {
    // Yesterday's schema, for a migration's test: never one of the spare stores below.
    if (!url) {
      const db = await openPglite("memory://");
      await migrate(db, options);
      return { db, schema: null, drop: () => db.close() };
    }
    const { db, schema } = await migratedSchema(url, options);
    return { db, schema, drop: () => dropSchema(db, schema) };
  }
  const spare = spareStores.pop();
  if (spare?.kind === "pglite") return reusable(spare.db, null);
  if (spare?.kind === "postgres")
    return reusable(await openPostgres({ url: url!, schema: spare.schema }), spare.schema);
  if (!url) {
    const db = await openPglite("memory://", {
      loadDataDir: await migratedTemplate(),
      settings: TEST_PGLITE_SETTINGS,
    });
    return reusable(db, null);
  }
  const { db, schema } = await migratedSchema(url);
  return reusable(db, schema);
}

/** A new schema of its own in the real PostgreSQL, migrated (up to `until`, if given). */
async function migratedSchema(
  url: string,
  options: { until?: string } = {},
): Promise<{ db: Db; schema: string }> {
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const db = await openPostgres({ url, schema });
  await migrate(db, options);
  return { db, schema };
}

async function dropSchema(db: Db, schema: string): Promise<void> {
  await db.query(`DROP SCHEMA ${schema} CASCADE`);
  await db.close();
}

/**
 * Stores given back (drop) are emptied and kept for this process's next openTestDb. The suite runs
 * several test files to a process (scripts/run-tests.mjs), and a new store per app cost a new
 * PGlite instance from the template (about 0.8 s of CPU) or a new schema with every migration
 * (about 1 s); emptying one is a TRUNCATE of its tables. A store is kept only if its schema is
 * still exactly the migrated one (schemaFingerprint): one whose test renamed a table, dropped a
 * function or disabled a trigger is closed (its schema dropped) as before, and so is one whose
 * emptying fails (a test closed it, say). PostgreSQL schemas are kept by name, their connections
 * closed, so that no session state (settings, locks, listeners) reaches the next test; PGlite has
 * one session, reset with it.
 */
type Spare = { kind: "pglite"; db: Db } | { kind: "postgres"; schema: string };
const spareStores: Spare[] = [];
let migratedFingerprint: Promise<string> | null = null;

async function reusable(db: Db, schema: string | null): Promise<TestDb> {
  // The first store of the process is as the migrations left it: its fingerprint is the reference.
  migratedFingerprint ??= schemaFingerprint(db);
  const fingerprint = await migratedFingerprint;
  closeSparesAtExit();
  return {
    db,
    schema,
    async drop() {
      if (await emptiedForReuse(db, fingerprint)) {
        if (schema === null) spareStores.push({ kind: "pglite", db });
        else {
          await db.close();
          spareStores.push({ kind: "postgres", schema });
        }
      } else if (schema === null) await db.close();
      else await dropSchema(db, schema);
    },
  };
}

/**
 * The spare stores are closed, and their schemas dropped, when the process's tests are over: the
 * test runner's entry for a process (scripts/run-tests.mjs) ends with a root `after` hook that
 * calls CLOSE_SPARE_STORES, which runs once every file's own `after` hooks have run. An open PGlite
 * that ran a few statements in quick succession has PostgreSQL's 10-second idle-stats timer armed,
 * and that timer holds the event loop: `beforeExit` alone, the fallback for a file run any other
 * way, fired only once it had gone off, about 10 s after the last test of every process.
 */
const CLOSE_SPARE_STORES = Symbol.for("gss.test.closeSpareStores");

async function closeSpares(): Promise<void> {
  const spares = spareStores.splice(0);
  await Promise.all(
    spares.map(async (spare) => {
      if (spare.kind === "pglite") return spare.db.close();
      const db = await openPostgres({ url: process.env.DATABASE_URL!, schema: spare.schema });
      await dropSchema(db, spare.schema);
    }),
  ).catch((err) => console.error("closing the spare test stores:", err));
}

let closingAtExit = false;
function closeSparesAtExit(): void {
  if (closingAtExit) return;
  closingAtExit = true;
  (globalThis as Record<symbol, unknown>)[CLOSE_SPARE_STORES] = closeSpares;
  // The event fires again once the stores are closed, with nothing spare left.
  process.on("beforeExit", () => {
    if (spareStores.length > 0) void closeSpares();
  });
}

/** The shape of the store's schema: tables, columns, constraints, functions' bodies and triggers. */
async function schemaFingerprint(db: Db): Promise<string> {
  const rows = await db.query<{ f: string }>(
    `SELECT md5(string_agg(x, E'\n' ORDER BY x)) AS f FROM (
       SELECT 'r ' || relname || ' ' || relkind::text || ' ' || coalesce(array_to_string(reloptions, ','), '')
         FROM pg_class WHERE relnamespace = current_schema()::regnamespace
       UNION ALL
       SELECT 'a ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
       UNION ALL
       SELECT 'c ' || conname || ' ' || pg_get_constraintdef(oid)
         FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
       UNION ALL
       SELECT 'f ' || proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
       UNION ALL
       SELECT 't ' || c.relname || ' ' || t.tgname || ' ' || t.tgenabled::text
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE c.relnamespace = current_schema()::regnamespace
     ) s(x)`,
  );
  return rows[0]!.f;
}

/**
 * Whether the store's schema is still the migrated one and it could be emptied; false for one
 * closed or broken by its test, which is then closed as any other store.
 */
async function emptiedForReuse(db: Db, migrated: string): Promise<boolean> {
  try {
    if ((await schemaFingerprint(db)) !== migrated) return false;
    await emptyStore(db);
    return true;
  } catch {
    return false;
  }
}

/** Every table emptied (the migrator's own two aside) and every sequence back at its start. */
async function emptyStore(db: Db): Promise<void> {
  const tables = await db.query<{ name: string }>(
    `SELECT quote_ident(relname) AS name FROM pg_class
     WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')
       AND relname NOT IN ('schema_migrations', 'schema_functions')`,
  );
  const sequences = await db.query<{ name: string }>(
    `SELECT quote_ident(relname) AS name FROM pg_class
     WHERE relnamespace = current_schema()::regnamespace AND relkind = 'S'`,
  );
  await db.transaction(async (tx) => {
    await tx.query(`TRUNCATE ${tables.map((t) => t.name).join(", ")} RESTART IDENTITY CASCADE`);
    for (const s of sequences) await tx.query(`ALTER SEQUENCE ${s.name} RESTART`);
  });
  if (db.kind === "pglite") {
    // The one session's state: settings a test changed, advisory locks it kept, channels it listened on.
    for (const sql of ["RESET ALL", "SELECT pg_advisory_unlock_all()", "UNLISTEN *"]) await db.query(sql);
  }
}

/**
 * A test store's server sized for a test: PGlite's defaults (128 MB of shared buffers, 100
 * connections' shared memory, in a process that has one connection) cost most of the ~1.9 s of
 * CPU its start took; with these it starts in ~0.8 s (measured on this 2-core machine).
 */
const TEST_PGLITE_SETTINGS = {
  shared_buffers: "8MB",
  max_connections: "5",
  wal_buffers: "1MB",
  // Started from a data folder, PostgreSQL arms a 10-second startup-progress timer that PGlite
  // keeps re-arming: a store left open kept its test file's process alive until the file timeout.
  log_startup_progress_interval: "0",
};

/**
 * One migrated embedded database for the whole run, copied for each store (see dumpPglite). The
 * first test process that needs it builds it (initdb and every migration, about 3 s of CPU) and
 * leaves it in the system's temporary folder under a name drawn from the migrations and the
 * PGlite version; every later process, and every later run until a migration changes, loads the
 * file instead.
 */
let template: Promise<Blob> | null = null;
function migratedTemplate(): Promise<Blob> {
  template ??= (async () => {
    const file = migratedTemplatePath();
    try {
      return new Blob([await readFile(file)]);
    } catch {
      // Not built yet (or unreadable): build it below.
    }
    const db = await openPglite("memory://");
    await migrate(db);
    // Every store copies the whole tarball (reading it is most of a store's start): the template
    // databases go (no test creates a database), and a checkpoint leaves no WAL to replay.
    // 42.7 MB -> 27.5 MB.
    for (const sql of [
      "ALTER DATABASE template0 IS_TEMPLATE false",
      "DROP DATABASE template0",
      "ALTER DATABASE template1 IS_TEMPLATE false",
      "DROP DATABASE template1",
      "CHECKPOINT",
    ])
      await db.query(sql);
    const dump = await dumpPglite(db);
    await db.close();
    // Written under a name of its own, then renamed: a process reading it never sees half a file.
    const partial = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()));
    await rename(partial, file);
    return dump;
  })();
  return template;
}

/** Where the migrated template is kept (it may not be built yet). */
function migratedTemplatePath(): string {
  return join(tmpdir(), `gas-sponsorship-pglite-${templateKey()}.tar`);
}

/** The migrated template as a file: a tarball of the data folder (its paths relative to it). */
export async function migratedTemplateFile(): Promise<string> {
  await migratedTemplate();
  return migratedTemplatePath();
}

/** What the migrated template depends on: every SQL file the migrator applies, and PGlite's version. */
function templateKey(): string {
  const hash = createHash("sha256");
  hash.update("slim-1\0");
  const pglite = new URL("../../node_modules/@electric-sql/pglite/package.json", import.meta.url);
  hash.update(JSON.parse(readFileSync(pglite, "utf8")).version);
  const root = fileURLToPath(new URL("../../src/db/", import.meta.url));
  for (const dir of SQL_DIRS) {
    const path = join(root, dir);
    if (!existsSync(path)) continue;
    for (const name of readdirSync(path).sort()) {
      hash.update(`${dir}/${name}\0`);
      hash.update(readFileSync(join(path, name)));
    }
  }
  return hash.digest("hex").slice(0, 16);
}
const SQL_DIRS = ["migrations", "functions"];

export interface TestApp {
  app: FastifyInstance;
  services: Services;
  config: Config;
  db: Db;
  issuer: LocalIssuer;
  logs: string[];
  /** Injects, checks the response against the OpenAPI document, and remembers secrets it sees. */
  request(opts: InjectOptions & { token?: string }): Promise<LightMyRequestResponse>;
  token(email: string): Promise<string>;
  /** Every secret handed out so far (keys, tokens, the signer key). */
  secrets: Set<string>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  now?: () => number;
  /** Share a store with another instance (multi-instance tests). */
  db?: TestDb;
  rateLimitPrefix?: string;
  /**
   * Where fees come from. Default: a fixed oracle answering TEST_FEES for every chain (the app
   * has no chain). "chain": the service's own oracle reading CHAIN_<id>_RPC_URL, started with
   * the app and refreshed once before it is returned. Or any oracle, e.g. a fixedFeeOracle the
   * test turns stale.
   */
  feeOracle?: FeeOracle | "chain";
  /**
   * What code each sender runs. Default: with the chain's fee oracle, the service's own resolver
   * reading the chain; otherwise (the app has no chain) every sender is taken for a SimpleAccount
   * v0.7 with no code hash bound, as the fixed fee oracle stands in for the chain's fees.
   */
  senderCode?: SenderCodeResolver;
  /** The app logger's level (default debug: every line a test may look for). */
  logLevel?: string;
}

/** A chainless app's answer for every sender (see TestAppOptions.senderCode). */
export const everySenderASimpleAccount: SenderCodeResolver = {
  async resolve() {
    const rule = IMPLEMENTATION_RULES.find((r) => r.implementation.id === "simple-account-v0.7");
    assert.ok(rule, "the registry has SimpleAccount v0.7");
    return { kind: "known", implementation: rule.implementation, codeHash: ZERO_HASH, via: "deployed" };
  },
};

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const ownDb = options.db ? null : await openTestDb();
  const testDb = options.db ?? ownDb!;
  // What is open so far is closed again when a later step throws (a bad setting, say): left open,
  // a Redis connection or a timer kept the test file's process alive until its timeout.
  const opened: Array<() => Promise<unknown>> = ownDb ? [() => ownDb.drop()] : [];
  try {
    return await startOn(testDb, ownDb, opened, options);
  } catch (err) {
    for (const close of opened.reverse()) await close().catch(() => {});
    throw err;
  }
}

async function startOn(
  testDb: TestDb,
  ownDb: TestDb | null,
  opened: Array<() => Promise<unknown>>,
  options: TestAppOptions,
): Promise<TestApp> {
  const config = loadConfig({
    DATA_DIR: `memory://${randomBytes(4).toString("hex")}`,
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: process.env.REDIS_URL,
    SIGNER_PRIVATE_KEY: TEST_SIGNER_KEY,
    SECRETS_ENCRYPTION_KEY: TEST_SECRETS_KEY,
    CHAIN_14601_PAYMASTER_ADDRESS: TEST_PAYMASTER,
    CHAIN_14601_RPC_URL: "http://127.0.0.1:9",
    // Each Redis command may take 5 s, not production's 500 ms. A CI host running three test
    // processes stalled event loops past 500 ms (the timer fires before the reply is read): the
    // exact-count tests on Redis, the Cluster and Sentinel saw one instance's whole batch counted
    // in memory (40 of 60 passed against a budget of 20), and readiness read degraded in a test
    // about something else (two PINGs in a row, test/chain/paymaster-stake.test.ts, 2026-11-29).
    // Falling back to memory is tested with Redis away (a closed port fails at once).
    REDIS_COMMAND_TIMEOUT_MS: "5000",
    ...options.env,
  });
  const overrides: Partial<Services> = options.now ? { now: options.now } : {};
  if (options.feeOracle !== "chain") {
    overrides.feeOracle = options.feeOracle ?? fixedFeeOracle(TEST_FEES, options.now);
    overrides.senderCode = options.senderCode ?? everySenderASimpleAccount;
  } else if (options.senderCode) {
    overrides.senderCode = options.senderCode;
  }
  const wired = await wireServices(config, testDb.db, {
    rateLimitPrefix: options.rateLimitPrefix ?? `test:${randomBytes(6).toString("hex")}`,
    overrides,
  });
  opened.push(() => wired.close());
  const logs: string[] = [];
  // The service's own serializers (process/log.ts), so that what the tests read is what it logs.
  const logger = pino(
    logOptions(options.logLevel ?? "debug"),
    new Writable({
      write(chunk, _enc, done) {
        logs.push(String(chunk));
        done();
      },
    }),
  );
  const app = await buildApp({ services: wired.services, loggerInstance: logger });
  opened.push(() => app.close());
  await app.ready();
  if (options.feeOracle === "chain") {
    wired.services.feeOracle.start(logger.child({ component: "fee-oracle" }));
    await wired.services.feeOracle.refresh();
  }
  const validate = responseValidator(app.swagger() as Record<string, unknown>);
  const issuer = await localIssuer(config.dataDir);
  const secrets = new Set<string>([TEST_SIGNER_KEY, TEST_SIGNER_KEY.slice(2), TEST_SECRETS_KEY]);

  const request: TestApp["request"] = async ({ token, ...opts }) => {
    const headers = { ...(opts.headers ?? {}) } as Record<string, string>;
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await app.inject({ ...opts, headers });
    const body = res.body;
    if (body.includes('"apiKey"')) {
      const key = (JSON.parse(body) as { apiKey?: string }).apiKey;
      if (key) secrets.add(key);
    }
    validate(String(opts.method ?? "GET"), String(opts.url), res);
    return res;
  };

  return {
    app,
    services: wired.services,
    config,
    db: testDb.db,
    issuer,
    logs,
    request,
    secrets,
    async token(email) {
      const t = await issuer.issue(email);
      secrets.add(t);
      return t;
    },
    async close() {
      try {
        await app.close();
        await wired.close();
        // Every event this test caused matches the registry's payload types (test/support/events.ts).
        if (ownDb) await assertEventsMatchRegistry(testDb.db);
      } finally {
        if (ownDb) await ownDb.drop();
      }
      const leaked = [...secrets].filter((s) => logs.some((line) => line.includes(s)));
      assert.deepEqual(
        leaked.map((s) => `${s.slice(0, 8)}…`),
        [],
        "a secret reached the logs",
      );
    },
  };
}

/** Creates an organization, a project and (optionally) a key; returns what tests need. */
export async function seedProject(
  t: TestApp,
  opts: { email?: string; slug?: string; projectId?: string; rateLimit?: number; scopes?: string[] } = {},
) {
  const ownerToken = await t.token(opts.email ?? "owner@example.com");
  const slug = opts.slug ?? `org-${randomBytes(3).toString("hex")}`;
  const org = await t.request({
    method: "POST",
    url: "/orgs",
    token: ownerToken,
    payload: { name: slug, slug },
  });
  assert.equal(org.statusCode, 201, org.body);
  const projectId = opts.projectId ?? `p-${randomBytes(4).toString("hex")}`;
  const project = await t.request({
    method: "POST",
    url: "/projects",
    token: ownerToken,
    payload: { id: projectId, name: "Test project", owner: slug },
  });
  assert.equal(project.statusCode, 201, project.body);
  const key = await t.request({
    method: "POST",
    url: `/projects/${projectId}/apikeys`,
    token: ownerToken,
    payload: { rateLimit: opts.rateLimit ?? 1_000_000, ...(opts.scopes ? { scopes: opts.scopes } : {}) },
  });
  assert.equal(key.statusCode, 201, key.body);
  return {
    ownerToken,
    slug,
    orgId: (org.json() as { id: number }).id,
    projectId,
    apiKey: (key.json() as { apiKey: string }).apiKey,
    depositAddress: (project.json() as { deposit_address: string }).deposit_address,
  };
}

/**
 * Allows the mint call (MINT_TARGET, MINT_SELECTOR) on every chain served, not on one: the same
 * game contract address on both chains of the tests of money per chain.
 */
export async function allowMintOnEveryChain(
  t: Pick<TestApp, "request">,
  p: { projectId: string; ownerToken: string },
): Promise<void> {
  const res = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: MINT_TARGET, functionSelector: MINT_SELECTOR, chainId: null },
  });
  assert.equal(res.statusCode, 201, res.body);
}

/**
 * A project (seedProject) whose allowlist holds one call and whose tank holds `tankWei`, credited
 * straight to the ledger.
 */
export async function fundedProject(
  t: TestApp,
  call: { target: string; selector: string },
  tankWei: bigint,
  opts: Parameters<typeof seedProject>[1] = {},
) {
  const p = await seedProject(t, opts);
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: call.target, functionSelector: call.selector },
  });
  assert.equal(allow.statusCode, 201, allow.body);
  if (tankWei > 0n) {
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `test:${randomBytes(8).toString("hex")}`,
      amountWei: tankWei,
    });
  }
  return p;
}

/** The game contract and mint selector the webhook tests allowlist and authorize against. */
export const MINT_TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
export const MINT_SELECTOR = "0xa0712d68";

/**
 * One call authorization of a mint with the project's key, for `user` (a fresh random sender by
 * default), on `chainId` (14601 by default).
 */
export function authorizeMint(
  t: TestApp,
  p: { projectId: string; apiKey: string },
  user = `0x${randomBytes(20).toString("hex")}`,
  chainId = 14601,
) {
  return t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user,
      target: MINT_TARGET,
      selector: MINT_SELECTOR,
      estimatedGas: 100_000,
      chainId,
    },
  });
}

/** A paid operation as the settlement watcher reads it from a UserOperationEvent, fresh hashes each. */
export function paidOperation(
  authId: string | null,
  o: { blockNumber?: bigint; costWei?: bigint; logIndex?: number } = {},
): ChainOperation {
  const hash = () => `0x${randomBytes(32).toString("hex")}` as Hex;
  return {
    blockHash: hash(),
    logIndex: o.logIndex ?? 0,
    blockNumber: o.blockNumber ?? 1234n,
    txHash: hash(),
    userOpHash: hash(),
    sender: `0x${"ee".repeat(20)}`,
    authId: authId as Hex | null,
    success: true,
    prefundTooLow: false,
    actualGasUsed: 60_000n,
    actualGasCostWei: o.costWei ?? 1_000_000n,
  } as ChainOperation;
}

/**
 * One block's range of made-up paid operations (paidOperation), one per authorization in log
 * order, all with the block's hash, for a settlement watcher's `apply`.
 */
export function paidBlock(authIds: string[], blockNumber: bigint, epoch: bigint): ScannedRange {
  const blockHash = `0x${blockNumber.toString(16).padStart(64, "0")}` as Hex;
  const ops = authIds.map((authId, logIndex) => ({
    ...paidOperation(authId, { blockNumber, logIndex }),
    blockHash,
  }));
  return {
    fromBlock: blockNumber,
    toBlock: blockNumber,
    ops,
    last: { number: blockNumber, hash: blockHash },
    epoch,
  };
}

/**
 * The test app's settlement watcher of chain 14601 and TEST_PAYMASTER, for ranges of made-up
 * operations (paidBlock) given to its `apply`: its RPC client is never called.
 */
export function settlementWatcherOffChain(
  t: Pick<TestApp, "db" | "config">,
  options: Partial<SettlementWatcherOptions> = {},
): SettlementWatcher {
  const chain = t.config.chains.find((c) => c.chainId === 14601);
  if (!chain) throw new Error("the test app serves chain 14601");
  return settlementWatcher({
    db: t.db,
    client: {} as ChainClient,
    chainId: 14601,
    entryPoint: chain.entryPoint,
    paymaster: TEST_PAYMASTER,
    confirmations: 0,
    ...options,
  });
}
