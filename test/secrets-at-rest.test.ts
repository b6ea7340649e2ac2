import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { loadConfig } from "../src/config.ts";
import type { Db } from "../src/db/db.ts";
import { migrate } from "../src/db/migrate.ts";
import { openPglite } from "../src/db/pglite.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { creditDeposit } from "../src/ledger/ledger.ts";
import { runSecretsCli } from "../src/secrets/cli.ts";
import { decodeKey, keyIdOf, keyring, open, seal } from "../src/secrets/envelope.ts";
import { ensurePrivateDir, loadOrCreateSecret } from "../src/secrets/key-files.ts";
import { SECRETS_KEY_FILE, secretsKeyring } from "../src/secrets/keyring.ts";
import { SEALED_COLUMNS } from "../src/secrets/registry.ts";
import { resealSecrets } from "../src/secrets/reseal.ts";
import { type WebhookWorker, webhookWorker } from "../src/webhooks/worker.ts";
import { authorizeMint, seedProject, startTestApp, type TestApp, type TestDb } from "./support/app.ts";
import { freshDatabase } from "./support/fresh-database.ts";
import { addWebhookEndpoint, type Receiver, startReceiver, verifyWebhook } from "./support/receiver.ts";
import { ensureBuilt, runToExit } from "./support/server-process.ts";

/**
 * Issue 20, secrets at rest: webhook and approval signing secrets are stored sealed (AES-256-GCM,
 * bound to their row) under SECRETS_ENCRYPTION_KEY; the key rotates through
 * SECRETS_ENCRYPTION_KEYS_PREVIOUS and `npm run secrets -- rotate`; production refuses to start
 * without the key, and with an http identity provider; DATA_DIR is 0700 and its key files 0600.
 * Runs on PGlite, or on PostgreSQL when DATABASE_URL is set.
 */

const TARGET = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
const SELECTOR = "0xa0712d68";
const KEY_A = randomBytes(32).toString("base64");
const KEY_B = randomBytes(32).toString("hex");

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gss-secrets-"));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

function testWorker(db: Db, ring: TestApp["services"]["keyring"], retryDelayMs = 10): WebhookWorker {
  return webhookWorker(db, {
    retry: { baseDelayMs: retryDelayMs, maxDelayMs: 2 * retryDelayMs, maxAttempts: 3 },
    timeoutMs: 1000,
    pollIntervalMs: 60_000,
    keyring: ring,
  });
}

async function project(t: TestApp) {
  const p = await seedProject(t, { slug: `sr-${randomBytes(3).toString("hex")}` });
  const allow = await t.request({
    method: "POST",
    url: `/projects/${p.projectId}/allowlist`,
    token: p.ownerToken,
    payload: { targetContract: TARGET, functionSelector: SELECTOR },
  });
  assert.equal(allow.statusCode, 201, allow.body);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    reference: `14601:0xfund:${p.projectId}`,
    amountWei: 10n ** 17n,
  });
  return p;
}

async function putApproval(
  t: TestApp,
  p: { projectId: string; ownerToken: string },
  url: string,
  failMode: string,
) {
  const res = await t.request({
    method: "PUT",
    url: `/projects/${p.projectId}/approval-webhook`,
    token: p.ownerToken,
    payload: { url, timeoutMs: 1000, failMode },
  });
  assert.equal(res.statusCode, 200, res.body);
  const secret = (res.json() as { secret: string }).secret;
  t.secrets.add(secret);
  return secret;
}

async function endpointRow(db: Db, id: number) {
  const [row] = await db.query<{ secret: string; previous_secret: string | null }>(
    "SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1",
    [id],
  );
  return row!;
}

async function approvalRow(db: Db, projectId: string) {
  const [row] = await db.query<{ approval_secret: string }>(
    "SELECT approval_secret FROM project_webhook_settings WHERE project_id = $1",
    [projectId],
  );
  return row!.approval_secret;
}

/** Credits a deposit (a `deposit.credited` event) and runs the worker until it is attempted. */
async function deliverDeposit(db: Db, worker: WebhookWorker, projectId: string) {
  await creditDeposit(db, {
    projectId,
    reference: `14601:0x${randomBytes(8).toString("hex")}:0`,
    amountWei: 7n,
  });
  for (let pass = 0; pass < 200; pass++) {
    await worker.drain();
    const [row] = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN event_outbox e ON e.id = d.event_id
       WHERE e.project_id = $1 AND d.attempts = 0`,
      [projectId],
    );
    if (row!.n === 0) return;
    await sleep(10);
  }
  assert.fail("the delivery was never attempted");
}

describe("the envelope", () => {
  const ring = keyring(decodeKey(KEY_A));

  it("is v1:<keyId>:<iv>:<ciphertext+tag> in base64url, and opens only with its binding", () => {
    const sealed = seal(ring, "whsec_hello", "webhook_endpoints:1");
    assert.match(sealed, /^v1:[A-Za-z0-9_-]{8}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]+$/);
    assert.equal(sealed.split(":")[1], keyIdOf(decodeKey(KEY_A)));
    assert.ok(!sealed.includes("hello"));
    assert.notEqual(sealed, seal(ring, "whsec_hello", "webhook_endpoints:1"), "a fresh IV each time");
    assert.deepEqual(open(ring, sealed, "webhook_endpoints:1"), {
      ok: true,
      plaintext: "whsec_hello",
      keyId: ring.current.id,
    });
    assert.deepEqual(open(ring, sealed, "webhook_endpoints:2"), { ok: false, reason: "not_authentic" });
    assert.deepEqual(open(ring, sealed, "project_webhook_settings:1"), {
      ok: false,
      reason: "not_authentic",
    });
    const [v, id, iv, body] = sealed.split(":") as [string, string, string, string];
    const flipped = Buffer.from(body, "base64url");
    flipped[0]! ^= 1;
    assert.equal(
      open(ring, `${v}:${id}:${iv}:${flipped.toString("base64url")}`, "webhook_endpoints:1").ok,
      false,
    );
    assert.deepEqual(open(keyring(decodeKey(KEY_B)), sealed, "webhook_endpoints:1"), {
      ok: false,
      reason: "unknown_key",
    });
    assert.deepEqual(open(ring, "whsec_plain", "webhook_endpoints:1"), { ok: false, reason: "not_sealed" });
  });

  it("takes a key as hex or base64, never quoting a bad one", () => {
    assert.equal(decodeKey(KEY_B).toString("hex"), KEY_B);
    assert.equal(decodeKey(KEY_A).toString("base64"), KEY_A);
    for (const bad of ["short", "0".repeat(64), `${KEY_B}00`, "x".repeat(44)]) {
      assert.throws(
        () => decodeKey(bad),
        (err: Error) => !err.message.includes(bad),
      );
    }
  });
});

describe("secrets at rest through the API", () => {
  let t: TestApp;
  let worker: WebhookWorker;
  let receiver: Receiver;
  before(async () => {
    t = await startTestApp();
    worker = testWorker(t.db, t.services.keyring);
    receiver = await startReceiver({ status: 200, body: '{"approve": true}' });
  });
  after(async () => {
    await worker.stop();
    await receiver.close();
    await t.close();
  });

  it("stores no plain text, and deliveries and approval requests still verify with the secret shown once", async () => {
    const p = await project(t);
    const endpoint = await addWebhookEndpoint(t, p, receiver.url, ["deposit.credited"]);
    const approvalSecret = await putApproval(t, p, receiver.url, "closed");

    const stored = await endpointRow(t.db, endpoint.id);
    assert.match(stored.secret, /^v1:/);
    assert.equal(stored.previous_secret, null);
    const storedApproval = await approvalRow(t.db, p.projectId);
    assert.match(storedApproval, /^v1:/);
    // Nothing of either secret in any column of either table.
    const dump = JSON.stringify([
      await t.db.query("SELECT * FROM webhook_endpoints"),
      await t.db.query("SELECT * FROM project_webhook_settings"),
    ]);
    for (const secret of [endpoint.secret, approvalSecret]) {
      assert.ok(!dump.includes(secret) && !dump.includes(secret.slice("whsec_".length)));
    }
    assert.ok(!dump.includes("whsec_"));

    await deliverDeposit(t.db, worker, p.projectId);
    assert.equal(receiver.received.length, 1);
    assert.ok(verifyWebhook(endpoint.secret, receiver.received[0]!.headers, receiver.received[0]!.body));

    assert.equal((await authorizeMint(t, p)).statusCode, 200);
    assert.equal(receiver.received.length, 2);
    assert.ok(verifyWebhook(approvalSecret, receiver.received[1]!.headers, receiver.received[1]!.body));

    // A rotated secret is sealed too, and the previous one (moved within the row) still signs.
    const rotated = await t.request({
      method: "POST",
      url: `/projects/${p.projectId}/webhooks/${endpoint.id}/rotate-secret`,
      token: p.ownerToken,
    });
    assert.equal(rotated.statusCode, 200, rotated.body);
    const fresh = (rotated.json() as { secret: string }).secret;
    t.secrets.add(fresh);
    const after = await endpointRow(t.db, endpoint.id);
    assert.equal(after.previous_secret, stored.secret);
    assert.ok(!after.secret.includes(fresh.slice("whsec_".length)));
    await deliverDeposit(t.db, worker, p.projectId);
    const last = receiver.received.at(-1)!;
    assert.ok(
      verifyWebhook(fresh, last.headers, last.body) &&
        verifyWebhook(endpoint.secret, last.headers, last.body),
    );
  });

  it("the database refuses a plain-text secret, and rows from before are sealed by the start-up step", async () => {
    const p = await project(t);
    const endpoint = await addWebhookEndpoint(t, p, receiver.url, ["deposit.credited"]);
    const approvalSecret = await putApproval(t, p, receiver.url, "closed");
    await assert.rejects(
      t.db.query("UPDATE webhook_endpoints SET secret = $2 WHERE id = $1", [endpoint.id, endpoint.secret]),
      /webhook_endpoints_secret_sealed/,
    );
    await assert.rejects(
      t.db.query("UPDATE project_webhook_settings SET approval_secret = $2 WHERE project_id = $1", [
        p.projectId,
        approvalSecret,
      ]),
      /project_webhook_settings_approval_secret_sealed/,
    );

    // Rows as a release before migration 018 left them: the constraints are NOT VALID, as there.
    await t.db.transaction(async (tx) => {
      await tx.query("ALTER TABLE webhook_endpoints DROP CONSTRAINT webhook_endpoints_secret_sealed");
      await tx.query(
        "ALTER TABLE project_webhook_settings DROP CONSTRAINT project_webhook_settings_approval_secret_sealed",
      );
      await tx.query("UPDATE webhook_endpoints SET secret = $2 WHERE id = $1", [
        endpoint.id,
        endpoint.secret,
      ]);
      await tx.query("UPDATE project_webhook_settings SET approval_secret = $2 WHERE project_id = $1", [
        p.projectId,
        approvalSecret,
      ]);
      await tx.query(
        `ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_sealed
           CHECK (secret ~ '^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$') NOT VALID`,
      );
      await tx.query(
        `ALTER TABLE project_webhook_settings ADD CONSTRAINT project_webhook_settings_approval_secret_sealed
           CHECK (approval_secret ~ '^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$') NOT VALID`,
      );
    });
    assert.equal((await endpointRow(t.db, endpoint.id)).secret, endpoint.secret);

    const report = await resealSecrets(t.db, t.services.keyring, SEALED_COLUMNS, "plaintext");
    assert.equal(report.resealed, 2);
    assert.match((await endpointRow(t.db, endpoint.id)).secret, /^v1:/);
    assert.match(await approvalRow(t.db, p.projectId), /^v1:/);
    const [{ n }] = (await t.db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM webhook_endpoints WHERE secret LIKE 'whsec_%' OR previous_secret LIKE 'whsec_%')
        + (SELECT count(*) FROM project_webhook_settings WHERE approval_secret LIKE 'whsec_%')::int AS n`,
    )) as [{ n: number }];
    assert.equal(Number(n), 0, "no plain text left in any row");
    assert.equal((await resealSecrets(t.db, t.services.keyring, SEALED_COLUMNS, "plaintext")).resealed, 0);

    const seen = receiver.received.length;
    await deliverDeposit(t.db, worker, p.projectId);
    assert.ok(
      verifyWebhook(endpoint.secret, receiver.received[seen]!.headers, receiver.received[seen]!.body),
    );
  });

  it("a sealed secret copied into another project's row does not open: no request is sent, the API answers, the log names no secret", async () => {
    const victim = await project(t);
    const attacker = await project(t);
    const victimEndpoint = await addWebhookEndpoint(t, victim, receiver.url, ["deposit.credited"]);
    const attackerEndpoint = await addWebhookEndpoint(t, attacker, receiver.url, ["deposit.credited"]);
    const victimSealed = (await endpointRow(t.db, victimEndpoint.id)).secret;
    await t.db.query("UPDATE webhook_endpoints SET secret = $2 WHERE id = $1", [
      attackerEndpoint.id,
      victimSealed,
    ]);

    const logged: string[] = [];
    const record = (obj: object, msg?: string) => void logged.push(`${msg} ${JSON.stringify(obj)}`);
    // Retries a minute apart: a drain runs every attempt that comes due while it runs.
    const logging = testWorker(t.db, t.services.keyring, 60_000);
    logging.start({ debug: record, info: record, warn: record, error: record });
    const seen = receiver.received.length;
    try {
      await deliverDeposit(t.db, logging, attacker.projectId);
    } finally {
      await logging.stop();
    }
    assert.equal(receiver.received.length, seen, "nothing was sent");
    const failure = logged.find((l) => l.includes("cannot be decrypted"));
    assert.ok(failure, logged.join("\n"));
    assert.match(failure, /does not authenticate/);
    assert.match(failure, new RegExp(`"endpoint":${attackerEndpoint.id}`));
    for (const secret of [victimEndpoint.secret, victimSealed, victimEndpoint.secret.slice(6)]) {
      assert.ok(!logged.some((l) => l.includes(secret)), "no secret in the log");
    }

    const deliveries = await t.request({
      method: "GET",
      url: `/projects/${attacker.projectId}/webhooks/${attackerEndpoint.id}/deliveries`,
      token: attacker.ownerToken,
    });
    assert.equal(deliveries.statusCode, 200, deliveries.body);
    const [delivery] = (deliveries.json() as { deliveries: { status: string; log: { error: string }[] }[] })
      .deliveries;
    assert.equal(delivery!.status, "pending", "retried on the usual schedule");
    assert.match(delivery!.log[0]!.error, /^not sent: the endpoint's signing secret cannot be decrypted$/);
    const listed = await t.request({
      method: "GET",
      url: `/projects/${attacker.projectId}/webhooks`,
      token: attacker.ownerToken,
    });
    assert.equal(listed.statusCode, 200);

    // The approval secret likewise: the fail mode decides, nothing is asked unsigned.
    const victimApproval = await putApproval(t, victim, receiver.url, "closed");
    await putApproval(t, attacker, receiver.url, "closed");
    await t.db.query("UPDATE project_webhook_settings SET approval_secret = $2 WHERE project_id = $1", [
      attacker.projectId,
      await approvalRow(t.db, victim.projectId),
    ]);
    t.services.approvals.forget(attacker.projectId);
    const asked = receiver.received.length;
    const refused = await authorizeMint(t, attacker);
    assert.equal(refused.statusCode, 503, refused.body);
    assert.equal((refused.json() as { code: string }).code, "approval_unavailable");
    assert.ok(!refused.body.includes(victimApproval));
    const shown = await t.request({
      method: "GET",
      url: `/projects/${attacker.projectId}/approval-webhook`,
      token: attacker.ownerToken,
    });
    assert.equal(shown.statusCode, 200, shown.body);
    const opened = await t.request({
      method: "PUT",
      url: `/projects/${attacker.projectId}/approval-webhook`,
      token: attacker.ownerToken,
      payload: { url: receiver.url, timeoutMs: 1000, failMode: "open" },
    });
    assert.equal(opened.statusCode, 200, opened.body);
    assert.equal((await authorizeMint(t, attacker)).statusCode, 200, "fail-open sponsors");
    assert.equal(receiver.received.length, asked, "the receiver was never asked");
    // The victim's own row still opens.
    assert.equal((await authorizeMint(t, victim)).statusCode, 200);
    assert.ok(
      verifyWebhook(victimApproval, receiver.received.at(-1)!.headers, receiver.received.at(-1)!.body),
    );
  });
});

/**
 * A store the test and `npm run secrets` both open: a database of its own on PostgreSQL, or an
 * embedded DATA_DIR (closed while the command runs: it takes the directory's lock).
 */
async function sharedStore(): Promise<{
  env: Record<string, string>;
  open(): Promise<TestDb>;
  drop(): Promise<void>;
}> {
  const dataDir = tempDir();
  if (process.env.DATABASE_URL) {
    const fresh = await freshDatabase("gss_secrets");
    return {
      env: { DATABASE_URL: fresh.url, DATA_DIR: dataDir },
      async open() {
        const db = await openPostgres({ url: fresh.url });
        await migrate(db);
        return { db, schema: null, drop: () => db.close() };
      },
      drop: () => fresh.drop(),
    };
  }
  // As an older release left it: readable by the group and others.
  chmodSync(dataDir, 0o755);
  return {
    env: { DATA_DIR: dataDir },
    async open() {
      const db = await openPglite(join(dataDir, "pglite"));
      await migrate(db);
      return { db, schema: null, drop: () => db.close() };
    },
    async drop() {},
  };
}

describe("rotating the secrets key", () => {
  it("reads what the old key sealed once it is previous; rotate re-seals it; then the old key can go", async () => {
    const store = await sharedStore();
    const receiver = await startReceiver({ status: 200, body: '{"approve": true}' });
    const cli = async (args: string[], env: Record<string, string>) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runSecretsCli(
        args,
        { ...store.env, LOG_LEVEL: "silent", ...env },
        {
          out: (l) => out.push(l),
          err: (l) => err.push(l),
        },
      );
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    try {
      let db = await store.open();
      // Written under key A.
      const a = await startTestApp({ db, env: { SECRETS_ENCRYPTION_KEY: KEY_A } });
      const p = await project(a);
      const endpoint = await addWebhookEndpoint(a, p, receiver.url, ["deposit.credited"]);
      const approvalSecret = await putApproval(a, p, receiver.url, "closed");
      await a.close();
      const idA = keyIdOf(decodeKey(KEY_A));
      const idB = keyIdOf(decodeKey(KEY_B));
      assert.ok((await endpointRow(db.db, endpoint.id)).secret.startsWith(`v1:${idA}:`));

      // Key B is current, A previous: A's rows are read, and not rewritten by merely serving.
      const b = await startTestApp({
        db,
        env: { SECRETS_ENCRYPTION_KEY: KEY_B, SECRETS_ENCRYPTION_KEYS_PREVIOUS: KEY_A },
      });
      const workerB = testWorker(db.db, b.services.keyring);
      await deliverDeposit(db.db, workerB, p.projectId);
      assert.ok(verifyWebhook(endpoint.secret, receiver.received[0]!.headers, receiver.received[0]!.body));
      assert.equal((await authorizeMint(b, p)).statusCode, 200);
      assert.ok(verifyWebhook(approvalSecret, receiver.received[1]!.headers, receiver.received[1]!.body));
      assert.ok((await endpointRow(db.db, endpoint.id)).secret.startsWith(`v1:${idA}:`));
      await workerB.stop();
      await b.close();
      await db.drop();

      // Without key A the rotation cannot open them, and says so without a secret.
      const blind = await cli(["rotate"], { SECRETS_ENCRYPTION_KEY: KEY_B });
      assert.equal(blind.code, 1, blind.err);
      assert.match(
        blind.err,
        /cannot decrypt webhook_endpoints \d+ secret: it was sealed under a key that is not configured/,
      );
      assert.ok(!`${blind.out}${blind.err}`.includes(endpoint.secret));

      const rotated = await cli(["rotate"], {
        SECRETS_ENCRYPTION_KEY: KEY_B,
        SECRETS_ENCRYPTION_KEYS_PREVIOUS: KEY_A,
      });
      assert.equal(rotated.code, 0, rotated.err);
      assert.match(rotated.out, new RegExp(`re-encrypted 2 secret\\(s\\) under key ${idB}`));
      assert.match(rotated.out, /every stored secret is under the current key/);
      const status = await cli(["status"], { SECRETS_ENCRYPTION_KEY: KEY_B });
      assert.equal(status.code, 0, status.err);
      assert.match(status.out, new RegExp(`current key ${idB}: 2 secret\\(s\\)`));
      for (const output of [rotated, status]) {
        assert.ok(
          !`${output.out}${output.err}`.includes(KEY_A) && !`${output.out}${output.err}`.includes(KEY_B),
        );
      }

      // Key A removed: everything still opens and signs.
      db = await store.open();
      assert.ok((await endpointRow(db.db, endpoint.id)).secret.startsWith(`v1:${idB}:`));
      assert.ok((await approvalRow(db.db, p.projectId)).startsWith(`v1:${idB}:`));
      const onlyB = await startTestApp({ db, env: { SECRETS_ENCRYPTION_KEY: KEY_B } });
      const workerOnlyB = testWorker(db.db, onlyB.services.keyring);
      await deliverDeposit(db.db, workerOnlyB, p.projectId);
      const last = receiver.received.at(-1)!;
      assert.ok(verifyWebhook(endpoint.secret, last.headers, last.body));
      assert.equal((await authorizeMint(onlyB, p)).statusCode, 200);
      assert.ok(
        verifyWebhook(approvalSecret, receiver.received.at(-1)!.headers, receiver.received.at(-1)!.body),
      );
      await workerOnlyB.stop();
      await onlyB.close();
      await db.drop();
      if (!process.env.DATABASE_URL) {
        assert.equal(mode(store.env.DATA_DIR!), 0o700, "the embedded DATA_DIR is 0700");
        assert.equal(mode(join(store.env.DATA_DIR!, "pglite")), 0o700);
      }
    } finally {
      await receiver.close();
      await store.drop();
    }
  });
});

describe("the data directory and its key files", () => {
  it("development generates the secrets key once into DATA_DIR: directory 0700, key files 0600", () => {
    const dataDir = join(tempDir(), "data");
    const config = loadConfig({ DATA_DIR: dataDir });
    const first = secretsKeyring(config);
    assert.equal(mode(dataDir), 0o700);
    assert.equal(mode(join(dataDir, SECRETS_KEY_FILE)), 0o600);
    assert.equal(secretsKeyring(config).current.id, first.current.id, "the same key at the next start");
    loadOrCreateSecret(dataDir, "signer.key", () => "0x01");
    assert.equal(mode(join(dataDir, "signer.key")), 0o600);

    // Once a key is configured, the file's key still opens what it sealed.
    const sealed = seal(first, "whsec_dev", "webhook_endpoints:9");
    const configured = secretsKeyring(loadConfig({ DATA_DIR: dataDir, SECRETS_ENCRYPTION_KEY: KEY_A }));
    assert.equal(configured.current.id, keyIdOf(decodeKey(KEY_A)));
    assert.equal(open(configured, sealed, "webhook_endpoints:9").ok, true);
  });

  it("tightens a DATA_DIR and key files that an older release left readable", () => {
    const dataDir = tempDir();
    chmodSync(dataDir, 0o755);
    writeFileSync(join(dataDir, "signer.key"), "0x02\n", { mode: 0o644 });
    writeFileSync(join(dataDir, SECRETS_KEY_FILE), `${KEY_A}\n`, { mode: 0o644 });
    ensurePrivateDir(dataDir);
    assert.equal(mode(dataDir), 0o700);
    assert.equal(
      loadOrCreateSecret(dataDir, "signer.key", () => "unused"),
      "0x02",
    );
    assert.equal(secretsKeyring(loadConfig({ DATA_DIR: dataDir })).current.id, keyIdOf(decodeKey(KEY_A)));
    assert.equal(mode(join(dataDir, "signer.key")), 0o600);
    assert.equal(mode(join(dataDir, SECRETS_KEY_FILE)), 0o600);
  });
});

/** A TCP port that counts the connections made to it (a stand-in for PostgreSQL and Redis). */
async function countingPort(): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : 0,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("production refuses to start", () => {
  before(() => ensureBuilt());

  const production = (dataDir: string, db: number, redis: number) => ({
    NODE_ENV: "production",
    DATA_DIR: dataDir,
    DATABASE_URL: `postgres://gss@127.0.0.1:${db}/gss`,
    REDIS_URL: `redis://127.0.0.1:${redis}`,
    SIGNER_PRIVATE_KEY: `0x${"11".repeat(32)}`,
    DEPOSIT_XPUB: `xpub${"6".repeat(107)}`,
    OIDC_ISSUER: "https://id.example",
    OIDC_AUDIENCE: "gss",
    OIDC_JWKS_URL: "https://id.example/jwks.json",
  });

  async function refused(
    env: (dataDir: string, db: number, redis: number) => Record<string, string | undefined>,
  ) {
    const db = await countingPort();
    const redis = await countingPort();
    const dataDir = tempDir();
    try {
      const result = await runToExit(env(dataDir, db.port, redis.port));
      const fatal = result.lines.filter((l) => l.level === 60);
      assert.equal(result.code, 2, JSON.stringify(result.lines));
      assert.equal(fatal.length, 1, JSON.stringify(result.lines));
      assert.equal(db.connections() + redis.connections(), 0, "connected to nothing");
      assert.deepEqual(readdirSync(dataDir), [], "created nothing");
      return String(fatal[0]!.msg);
    } finally {
      await db.close();
      await redis.close();
    }
  }

  it("without SECRETS_ENCRYPTION_KEY, naming the setting", async () => {
    const msg = await refused((dir, db, redis) => ({
      ...production(dir, db, redis),
      SECRETS_ENCRYPTION_KEY: undefined,
    }));
    assert.match(
      msg,
      /^refusing to start: SECRETS_ENCRYPTION_KEY is not set: in production the key that encrypts/,
    );
  });

  it("with a malformed key, naming it and not quoting it", async () => {
    const bad = "not-a-key-but-a-secret";
    const msg = await refused((dir, db, redis) => ({
      ...production(dir, db, redis),
      SECRETS_ENCRYPTION_KEY: bad,
    }));
    assert.match(msg, /^invalid configuration: SECRETS_ENCRYPTION_KEY: must be 32 bytes/);
    assert.ok(!msg.includes(bad));
  });

  it("with an http identity provider, naming OIDC_ISSUER and OIDC_JWKS_URL", async () => {
    const msg = await refused((dir, db, redis) => ({
      ...production(dir, db, redis),
      SECRETS_ENCRYPTION_KEY: KEY_A,
      OIDC_ISSUER: "http://127.0.0.1:8080",
      OIDC_JWKS_URL: "http://id.example/jwks.json",
    }));
    assert.match(msg, /^invalid configuration: OIDC_ISSUER: must use https: in production/);
    assert.match(msg, /OIDC_JWKS_URL: must use https: in production/);
  });
});
