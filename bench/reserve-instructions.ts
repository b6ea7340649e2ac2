import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrate } from "../src/db/migrate.ts";
import { openPostgres } from "../src/db/postgres.ts";
import { creditDeposit, reserveMany } from "../src/ledger/ledger.ts";
import { MONEY_SELECTOR, MONEY_TARGET, mintReservation } from "../test/support/money.ts";
import { freePort } from "../test/support/ports.ts";

/**
 * `npm run bench:instructions`: the CPU instructions PostgreSQL spends on the reservation, counted
 * by callgrind, so that a change to the reservation's SQL (its statements, triggers, indexes,
 * keys) can be priced without the noise of a shared 2-core machine: the same tree gives the same
 * reservation count to within a few thousand instructions in seventeen million, and the events'
 * within 0.5 % (event ids are random), run after run and whatever else the machine is doing, where
 * `npm run bench`'s req/s moves by ±15 % (issue 22).
 *
 * It makes a PostgreSQL cluster of its own in a temporary directory (the machine's initdb, as the
 * `postgres` user when run as root), migrates it with this tree's migrations and functions, seeds
 * one funded project with an API key, an allowlisted call and BENCH_INSTR_PREFILL sponsorships
 * (50,000: indexes a few levels deep, as in a store that has been serving), and stops it. Then,
 * for each batch size, it runs the reservation of this tree (db/functions/reserve_sponsorships.sql)
 * in PostgreSQL's single-user mode under callgrind: once with 4 calls and once with 12, each a
 * batch of distinct senders as `npm run bench`'s 1,000 users make them, all in one transaction
 * rolled back at the end, on a fresh copy of the seeded cluster. The difference of the two counts,
 * divided by 8, is the instructions of one call, start-up and first-call planning cancelled out.
 * It needs valgrind and PostgreSQL's server binaries (Debian: valgrind, postgresql); it prints
 * instructions, not seconds: at this machine's speed, about 150,000 instructions take 50-60 µs.
 *
 * The same way, it prices a subscribed project's events: 25 sponsorship.sponsored events written in
 * one statement (emit_events, as the relay writes them) with their deliveries to the project's one
 * endpoint, and then the first attempt of each recorded as the worker records it
 * (webhook_record_attempts): instructions per event for the writing, and for the recording.
 *
 * To compare two trees, run it in each (bench:ab's clone, say). Knobs: BENCH_INSTR_BATCHES
 * ("1,25"), BENCH_INSTR_PREFILL (50000), BENCH_KEEP (keep the directory).
 */

const batches = (process.env.BENCH_INSTR_BATCHES ?? "1,25").split(",").map(Number);
const prefill = Number(process.env.BENCH_INSTR_PREFILL ?? 50_000);
const PROJECT = "instr-project";
const EVENTS = 25;
const DATABASE = "instr";

const bin = serverBinaries();
const asRoot = process.getuid?.() === 0;
const dir = mkdtempSync(join(tmpdir(), "gss-instr-"));
const seeded = join(dir, "seeded");
const work = join(dir, "work");

try {
  if (asRoot) run("chown", ["postgres", dir]);
  asServerUser(join(bin, "initdb"), ["-D", seeded, "-A", "trust", "-U", "postgres"]);
  await seed();
  console.log(
    `reservation instructions (callgrind, PostgreSQL ${version()} single-user, ${prefill.toLocaleString("en")} sponsorships before)`,
  );
  console.log("| batch | instructions per call | per authorization |");
  console.log("|--:|--:|--:|");
  for (const batch of batches) {
    const call = perCall((calls) => statements(batch, calls));
    console.log(`| ${batch} | ${fmt(call)} | ${fmt(call / batch)} |`);
  }
  const written = perCall((calls) => eventStatements(calls, false)) / EVENTS;
  const recorded = perCall((calls) => eventStatements(calls, true)) / EVENTS - written;
  console.log("");
  console.log(`events, ${EVENTS} a statement to one endpoint: instructions per event`);
  console.log("| writing the event and its delivery | recording its first attempt |");
  console.log("|--:|--:|");
  console.log(`| ${fmt(written)} | ${fmt(recorded)} |`);
} finally {
  if (process.env.BENCH_KEEP) console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}

/** Starts the cluster, migrates and seeds it, and stops it. */
async function seed(): Promise<void> {
  const port = await freePort();
  const opts = `-p ${port} -c listen_addresses=127.0.0.1 -c autovacuum=off -c fsync=off`;
  asServerUser(join(bin, "pg_ctl"), ["-D", seeded, "-o", opts, "-l", join(dir, "server.log"), "-w", "start"]);
  try {
    asServerUser(join(bin, "createdb"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", DATABASE]);
    const db = await openPostgres({ url: `postgres://postgres@127.0.0.1:${port}/${DATABASE}` });
    try {
      await migrate(db);
      const [org] = await db.query<{ id: string }>(
        "INSERT INTO organizations (name, slug) VALUES ('Studio', 'studio') RETURNING id::text",
      );
      await db.query(
        `INSERT INTO projects (id, org_id, owner, name, deposit_address)
         VALUES ($1, $2, 'studio', 'Game', '0x${"1".repeat(40)}')`,
        [PROJECT, org!.id],
      );
      await db.query(
        `INSERT INTO api_keys (project_id, digest, key_preview, rate_limit, scopes)
         VALUES ($1, $2, 'gss_live_inst', 1000000, '{sponsor}')`,
        [PROJECT, "0".repeat(64)],
      );
      await db.query(
        "INSERT INTO allowlist_entries (project_id, target_contract, function_selector) VALUES ($1, $2, $3)",
        [PROJECT, MONEY_TARGET, MONEY_SELECTOR],
      );
      await creditDeposit(db, { projectId: PROJECT, reference: "instr:tank", amountWei: 10n ** 30n });
      await db.query(
        `INSERT INTO webhook_endpoints (project_id, url, event_types, secret)
         VALUES ($1, 'https://hooks.example.com/instr', '{sponsorship.sponsored}', 'v1:k:sealed:secret')`,
        [PROJECT],
      );
      for (let done = 0; done < prefill; done += 500) {
        // Fixed ids as well as senders: the indexes are laid out the same on every run.
        const batch = Array.from({ length: Math.min(500, prefill - done) }, (_, i) => ({
          ...mintReservation(PROJECT, 1_000n, address(`prefill:${(done + i) % 1000}`)),
          authId: `0x${createHash("sha256")
            .update(`prefill:${done + i}`)
            .digest("hex")}`,
        }));
        await reserveMany(db, PROJECT, batch);
      }
      // Events already delivered, as a subscribed project that has been serving has them: their
      // deliveries and attempts, so that the events' indexes are as deep as the sponsorships'.
      for (let done = 0; done < prefill; done += 1000) {
        await db.query(
          `SELECT emit_events('sponsorship.sponsored', array_fill($1::text, ARRAY[1000]), array_fill($2::jsonb, ARRAY[1000]))`,
          [PROJECT, eventPayload()],
        );
        await db.query(
          `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, latency_ms, status_code)
           SELECT id, 1, now(), 3, 200 FROM webhook_deliveries WHERE status = 'pending'`,
        );
        await db.query(
          "UPDATE webhook_deliveries SET status = 'succeeded', attempts = 1, completed_at = now() WHERE status = 'pending'",
        );
      }
      await db.query("VACUUM ANALYZE");
    } finally {
      await db.close();
    }
  } finally {
    asServerUser(join(bin, "pg_ctl"), ["-D", seeded, "-m", "fast", "-w", "stop"]);
  }
}

/**
 * The instructions of one call of what `session(calls)` repeats: the sessions of 12 calls and of 4
 * counted, and their difference divided by 8, so start-up and first-call planning cancel out.
 */
function perCall(session: (calls: number) => string): number {
  return (instructionsOf(session(12)) - instructionsOf(session(4))) / 8;
}

/** Instructions callgrind counts for a single-user session of `sql`, on a fresh copy of the seeded cluster. */
function instructionsOf(sql: string): number {
  rmSync(work, { recursive: true, force: true });
  cpSync(seeded, work, { recursive: true });
  if (asRoot) run("chown", ["-R", "postgres", work]);
  const script = join(dir, "session.sql");
  writeFileSync(script, sql);
  if (asRoot) run("chown", ["postgres", script]);
  const out = asServerUser("sh", [
    "-c",
    `valgrind --tool=callgrind --callgrind-out-file=/dev/null ${join(bin, "postgres")} --single -D ${work} ` +
      `-c autovacuum=off ${DATABASE} < ${script}`,
  ]);
  if (/ERROR:/.test(out)) throw new Error(`a statement of the session failed:\n${out.slice(0, 2000)}`);
  const collected = /Collected : (\d+)/.exec(out);
  if (!collected) throw new Error(`callgrind reported no count:\n${out.slice(-2000)}`);
  return Number(collected[1]);
}

/**
 * The single-user session: one transaction, `calls` reservations (one line each, as single-user
 * mode reads a statement per line), rolled back. Every value is fixed, so every run is the same.
 */
function statements(batch: number, calls: number): string {
  const nowSec = 1_800_000_000;
  const lines = ["BEGIN"];
  for (let c = 0; c < calls; c++) {
    const items = Array.from({ length: batch }, (_, i) => {
      const k = c * batch + i;
      return {
        idx: i,
        nonce: null,
        digest: null,
        auth_id: `0x${createHash("sha256").update(`call:${k}`).digest("hex")}`,
        key_id: 1,
        chain_id: 14601,
        sender: address(`sender:${k % 1000}`),
        target: MONEY_TARGET,
        selector: MONEY_SELECTOR,
        gas: "150000",
        cost: "375000000000000",
        max_fee: "2500000000",
        max_priority_fee: "1000000000",
        paymaster: `0x${"00".repeat(19)}aa`,
        valid_after: nowSec - 60,
        valid_until: nowSec + 300,
        response: null,
        mode: "call",
        calls: null,
      };
    });
    const json = JSON.stringify(items).replaceAll("'", "''");
    lines.push(
      `SELECT count(*) FROM reserve_sponsorships('${PROJECT}', '${json}'::jsonb, to_timestamp(${nowSec}), false)`,
    );
  }
  lines.push("ROLLBACK", "");
  return lines.join("\n");
}

/**
 * `calls` statements of EVENTS sponsorship.sponsored events each (their deliveries made by the
 * fan-out), each followed, with `record`, by the record of a successful first attempt of every one
 * of those deliveries.
 */
function eventStatements(calls: number, record: boolean): string {
  const payload = eventPayload();
  const projects = `ARRAY[${Array(EVENTS).fill(`'${PROJECT}'`).join(",")}]`;
  const payloads = `ARRAY[${Array(EVENTS).fill(`'${payload}'::jsonb`).join(",")}]`;
  const fill = (v: string) => `array_fill(${v}, ARRAY[${EVENTS}])`;
  const lines = ["BEGIN"];
  for (let c = 0; c < calls; c++) {
    lines.push(`SELECT emit_events('sponsorship.sponsored', ${projects}, ${payloads})`);
    if (record) {
      lines.push(
        `SELECT count(*) FROM webhook_record_attempts(ARRAY(SELECT id FROM webhook_deliveries WHERE status = 'pending' ORDER BY id LIMIT ${EVENTS}), ` +
          `${fill("1")}, ${fill("'succeeded'::text")}, ${fill("200")}, ${fill("NULL::text")}, ${fill("NULL::bigint")}, ` +
          `${fill("now()")}, ${fill("3")}, ${fill("0")})`,
      );
    }
  }
  lines.push("ROLLBACK", "");
  return lines.join("\n");
}

/** A sponsorship.sponsored payload as the relay writes one (the same for every event here). */
function eventPayload(): string {
  return JSON.stringify({
    authorizationId: `0x${"ab".repeat(32)}`,
    chainId: 14601,
    mode: "call",
    sender: address("sender:0"),
    target: MONEY_TARGET,
    selector: MONEY_SELECTOR,
    calls: [{ target: MONEY_TARGET, selector: MONEY_SELECTOR }],
    maxTotalGas: "150000",
    maxGasCost: "375000000000000",
    validAfter: 1_799_999_940,
    validUntil: 1_800_000_300,
    sponsoredAt: "2027-01-15T08:00:00.000Z",
  });
}

function address(seed: string): string {
  return `0x${createHash("sha256").update(seed).digest("hex").slice(0, 40)}`;
}

/** The newest PostgreSQL server's binaries: PG_BINDIR, else Debian's /usr/lib/postgresql/<n>/bin. */
function serverBinaries(): string {
  if (process.env.PG_BINDIR) return process.env.PG_BINDIR;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error("no PostgreSQL server binaries: set PG_BINDIR");
  return join(root, newest, "bin");
}

function version(): string {
  return asServerUser(join(bin, "postgres"), ["--version"])
    .trim()
    .replace(/^postgres \(PostgreSQL\) /, "");
}

/** Runs a server tool as the `postgres` user when this process is root (initdb refuses root). */
function asServerUser(cmd: string, args: string[]): string {
  return asRoot ? run("runuser", ["-u", "postgres", "--", cmd, ...args]) : run(cmd, args);
}

function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw r.error;
  const out = `${r.stdout}${r.stderr}`;
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.slice(0, 3).join(" ")} exited ${r.status}:\n${out.slice(-2000)}`);
  return out;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en");
}
