/**
 * Reorganisations deeper than the confirmation depth, on a real anvil (`anvil_reorg` replaces the
 * newest blocks with new ones, optionally re-including transactions): a credit from a replaced
 * block is taken back by a reversal entry, never below an empty tank (the rest is a recorded
 * debt); a transfer the new chain includes again is credited again, so once net; each step is
 * applied once across crashes and across instances; and every reorganisation is logged at error
 * level and reported.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Address, Hex } from "viem";
import {
  findReorg,
  listReorgs,
  markReconciled,
  type ReorgSummary,
  recordReorg,
  remember,
  reorgEpoch,
  reorgProbe,
  StaleRangeError,
} from "../../src/chains/applied-blocks.ts";
import type { WatcherLog } from "../../src/chains/poll-loop.ts";
import type { DepositWatcher, depositWatcher } from "../../src/funding/deposit-watcher.ts";
import { parity } from "../../src/ledger/ledger.ts";
import { createMetrics } from "../../src/metrics/metrics.ts";
import { seedProject, startTestApp, type TestApp } from "../support/app.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import { balanceOf, depositWatcherOn, type Project, watcherClient } from "../support/chain-service.ts";
import { parseExposition } from "../support/prometheus.ts";

const CONFIRMATIONS = 1;

let chain: DevChain;
let t: TestApp;

before(async () => {
  chain = await startChain();
  t = await startTestApp({
    env: { CHAIN_14601_RPC_URL: chain.rpcUrl, CHAIN_14601_CONFIRMATIONS: String(CONFIRMATIONS) },
  });
});

after(async () => {
  await t?.close();
  await chain?.stop();
});

interface LogLine {
  level: "debug" | "info" | "warn" | "error";
  fields: Record<string, unknown>;
  msg: string;
}

function recordingLog(): WatcherLog & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine["level"]) =>
    (fields: object, msg = "") =>
      lines.push({ level, fields: fields as Record<string, unknown>, msg });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

function watcher(overrides: Partial<Parameters<typeof depositWatcher>[0]> = {}): DepositWatcher {
  return depositWatcherOn(t, chain, CONFIRMATIONS, overrides);
}

type Request = (args: { method: string; params: unknown[] }) => Promise<unknown>;
const rpc = (method: string, params: unknown[]) =>
  (chain.publicClient.request as unknown as Request)({ method, params });

/** Replaces the newest `depth` blocks; each of `include` goes into the new block at its offset from the first. */
async function reorganise(depth: number, include: [raw: Hex, offset: number][] = []) {
  await rpc("anvil_reorg", [depth, include]);
}

/** Pays a funding address and returns where the payment landed, once it has its confirmations. */
async function deposit(p: Project, valueWei: bigint) {
  const hash = await chain.wallets[2]!.sendTransaction({ to: p.depositAddress as Address, value: valueWei });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success");
  const raw = (await rpc("eth_getRawTransactionByHash", [hash])) as Hex;
  return { hash, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash, raw };
}

const confirm = () => chain.testClient.mine({ blocks: CONFIRMATIONS });

/** The blocks from `blockNumber` through the head. */
async function depthFrom(blockNumber: bigint): Promise<number> {
  return Number((await chain.publicClient.getBlockNumber()) - blockNumber + 1n);
}

async function entries(p: Project) {
  return t.db.query<{ kind: string; amount: string; reference: string }>(
    "SELECT kind, amount::text, reference FROM ledger_entries WHERE project_id = $1 ORDER BY id",
    [p.projectId],
  );
}

async function inSync(p: Project): Promise<boolean> {
  const [report] = await parity(t.db, [p.projectId]);
  return report!.inSync;
}

async function totalCredited(p: Project): Promise<string> {
  const res = await t.request({
    method: "GET",
    url: `/projects/${p.projectId}/funding-accounts`,
    token: p.ownerToken,
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json()[0] as { total_credited: string }).total_credited;
}

/** A fresh project whose watcher has caught up with the chain. */
async function freshProject(w: DepositWatcher = watcher()) {
  const p = await seedProject(t);
  await w.tick();
  return p;
}

/**
 * Spends from the chain's tank the way a reservation does (an entry and the cached balance in one
 * transaction, through the ledger's one writer). Not the reservation path, which is not what
 * these tests are about.
 */
async function spend(p: Project, amountWei: bigint) {
  await t.db.query("SELECT ledger_move($1, $2::integer, 'reserve', ARRAY[$3::numeric], ARRAY[$4::text])", [
    p.projectId,
    chain.chainId,
    (-amountWei).toString(),
    `0x${randomBytes(32).toString("hex")}`,
  ]);
}

describe("a credit from a replaced block", () => {
  test("is taken back by a reversal entry, with the balance and parity restored, and the reorganisation logged and reported", async () => {
    const log = recordingLog();
    const metrics = createMetrics({ version: "t", clusterWorker: false });
    const w = watcher({ log, metrics });
    const p = await freshProject(w);
    const paid = await deposit(p, 1_000n);
    await confirm();
    assert.equal((await w.tick()).credited, 1);
    assert.equal(await balanceOf(t, p), 1_000n);

    const depth = await depthFrom(paid.blockNumber);
    assert.ok(depth > CONFIRMATIONS, "the reorganisation reaches below the confirmation depth");
    await reorganise(depth);
    const report = await w.tick();

    assert.deepEqual(report.reorg && { ...report.reorg, reorgId: 0 }, {
      reorgId: 0,
      forkBlock: paid.blockNumber,
      depth: BigInt(depth),
      reversed: 1,
      reversedWei: 1_000n,
      shortfallWei: 0n,
    });
    assert.equal(report.credited, 0);
    assert.equal(await balanceOf(t, p), 0n);
    assert.equal(await inSync(p), true);
    assert.equal(await totalCredited(p), "0");
    const first = `${chain.chainId}:${paid.hash}:0`;
    assert.deepEqual(await entries(p), [
      { kind: "deposit", amount: "1000", reference: first },
      { kind: "reversal", amount: "-1000", reference: `reorg:${first}:${paid.blockHash}` },
    ]);

    const detected = log.lines.find((l) => l.level === "error" && /reorganisation/.test(l.msg));
    assert.ok(detected, "the reorganisation is logged at error level");
    assert.equal(detected.fields.chainId, chain.chainId);
    assert.equal(detected.fields.watcher, "deposits");
    assert.equal(detected.fields.forkBlock, paid.blockNumber.toString());
    assert.equal(detected.fields.depth, String(depth));

    const [recorded] = await listReorgs(t.db, { chainId: chain.chainId });
    assert.equal(recorded?.id, report.reorg!.reorgId);
    assert.equal(recorded?.forkBlock, paid.blockNumber);
    assert.ok(recorded?.reconciledAt);
    assert.deepEqual(
      recorded?.orphaned.map((b) => b.hash),
      [paid.blockHash],
    );
    assert.deepEqual(recorded?.summary, {
      compensations: 1,
      compensatedWei: 1_000n,
      shortfallWei: 0n,
      shortfalls: [],
    });
    const health = await reorgProbe(t.db, chain.chainId).check();
    assert.equal(health.status, "degraded");
    assert.match(health.detail ?? "", new RegExp(`block ${paid.blockNumber}, depth ${depth}`));

    // The metrics: one reorganisation of `depth` blocks, one credit taken back.
    const { samples } = parseExposition(await metrics.exposition());
    const counted = (name: string) =>
      samples.find(
        (x) =>
          x.name === name && x.labels.chain_id === String(chain.chainId) && x.labels.watcher === "deposits",
      )?.value;
    assert.equal(counted("gss_chain_reorgs_total"), 1);
    assert.equal(counted("gss_chain_reorged_blocks_total"), depth);
    assert.equal(counted("gss_reorg_reversals_total"), 1);

    // The new chain grows on: nothing is credited again, nothing is reversed twice.
    await chain.testClient.mine({ blocks: 3 });
    const later = await w.tick();
    assert.equal(later.reorg, null);
    assert.equal(later.credited, 0);
    assert.equal((await entries(p)).length, 2);
  });

  test("included again in another block of the new chain is credited again: once, net", async () => {
    const w = watcher();
    const p = await freshProject(w);
    const paid = await deposit(p, 2_500n);
    await confirm();
    assert.equal((await w.tick()).credited, 1);

    // The same signed transaction goes into the second block of the new chain.
    await reorganise(await depthFrom(paid.blockNumber), [[paid.raw, 1]]);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: paid.hash });
    assert.equal(receipt.blockNumber, paid.blockNumber + 1n);
    assert.notEqual(receipt.blockHash, paid.blockHash);

    assert.equal((await w.tick()).reorg?.reversed, 1);
    await confirm();
    assert.equal((await w.tick()).credited, 1);
    assert.equal((await w.tick()).credited, 0);

    assert.equal(await balanceOf(t, p), 2_500n);
    assert.equal(await inSync(p), true);
    assert.equal(await totalCredited(p), "2500");
    const first = `${chain.chainId}:${paid.hash}:0`;
    assert.deepEqual(await entries(p), [
      { kind: "deposit", amount: "2500", reference: first },
      { kind: "reversal", amount: "-2500", reference: `reorg:${first}:${paid.blockHash}` },
      { kind: "deposit", amount: "2500", reference: `${first}:1:${receipt.blockHash}` },
    ]);
  });

  test("already spent is taken back as far as the tank holds; the rest is a debt, recorded and logged", async () => {
    const log = recordingLog();
    const metrics = createMetrics({ version: "t", clusterWorker: false });
    const w = watcher({ log, metrics });
    const p = await freshProject(w);
    const paid = await deposit(p, 1_000n);
    await confirm();
    await w.tick();
    await spend(p, 700n);
    assert.equal(await balanceOf(t, p), 300n);

    await reorganise(await depthFrom(paid.blockNumber));
    const report = await w.tick();
    assert.equal(report.reorg?.reversedWei, 300n);
    assert.equal(report.reorg?.shortfallWei, 700n);
    assert.equal(await balanceOf(t, p), 0n);
    assert.equal(await inSync(p), true);

    const [recorded] = await listReorgs(t.db, { chainId: chain.chainId });
    assert.deepEqual(recorded?.summary, {
      compensations: 1,
      compensatedWei: 300n,
      shortfallWei: 700n,
      shortfalls: [{ projectId: p.projectId, shortfallWei: 700n }],
    });
    const debt = log.lines.find((l) => l.level === "error" && l.fields.shortfallWei === "700");
    assert.ok(debt, "the shortfall is logged at error level");
    assert.equal(debt.fields.projectId, p.projectId);
    assert.match(
      (await reorgProbe(t.db, chain.chainId).check()).detail ?? "",
      /700 wei could not be taken back/,
    );
  });
});

describe("exactly once", () => {
  test("a watcher that crashes in the middle of reconciling: the restarted one takes back only what is left", async () => {
    const w = watcher();
    const p = await freshProject(w);
    const first = await deposit(p, 10n);
    await deposit(p, 20n);
    await confirm();
    assert.equal((await w.tick()).credited, 2);
    const reorgsBefore = (await listReorgs(t.db, { chainId: chain.chainId })).length;

    await reorganise(await depthFrom(first.blockNumber));
    const crashed = watcher();
    const reorg = (await crashed.detectReorg())!;
    const credits = await crashed.orphanedCredits(reorg);
    assert.deepEqual(
      credits.map((c) => c.amountWei),
      [10n, 20n],
    );
    assert.equal(await crashed.compensate(reorg, credits.slice(0, 1)), 1);
    // A repeat of a finished step changes nothing.
    assert.equal(await crashed.compensate(reorg, credits.slice(0, 1)), 0);
    assert.equal(await balanceOf(t, p), 20n);
    // ... and the watcher dies before finishing.

    const restarted = watcher();
    assert.equal(
      (await restarted.detectReorg())?.id,
      reorg.id,
      "the open reorganisation is resumed, not found again",
    );
    const report = await restarted.tick();
    assert.equal(report.reorg?.reorgId, reorg.id);
    assert.equal(report.reorg?.reversed, 2);
    assert.equal(report.reorg?.reversedWei, 30n);
    assert.equal(await balanceOf(t, p), 0n);
    assert.equal(await inSync(p), true);
    assert.equal((await entries(p)).filter((e) => e.kind === "reversal").length, 2);
    assert.equal((await listReorgs(t.db, { chainId: chain.chainId })).length, reorgsBefore + 1);
    assert.equal((await watcher().tick()).reorg, null);
  });

  test("a range another instance read before the reorganisation is refused, not credited again", async () => {
    const w = watcher();
    const p = await freshProject(w);
    const paid = await deposit(p, 5n);
    await confirm();
    assert.equal((await w.tick()).credited, 1);
    // Another instance reads the same block, then stalls while the reorganisation is handled.
    const other = watcher();
    const stale = await other.scan(paid.blockNumber, paid.blockNumber);
    assert.equal(stale.deposits.filter((d) => d.projectId === p.projectId).length, 1);

    await reorganise(await depthFrom(paid.blockNumber));
    assert.equal((await w.tick()).reorg?.reversed, 1);
    // Applied now, the credit from the dead block would be a second inclusion: refused.
    await assert.rejects(other.apply(stale.deposits, stale.epoch), StaleRangeError);
    await assert.rejects(other.commit(stale), StaleRangeError);
    assert.equal(await balanceOf(t, p), 0n);
    assert.deepEqual(
      (await entries(p)).map((e) => e.kind),
      ["deposit", "reversal"],
    );
  });

  test("a range read across a reorganisation is refused: its first block does not continue the remembered one", async () => {
    const w = watcher();
    const p = await freshProject(w);
    await deposit(p, 1n);
    await confirm();
    await w.tick();
    const cursor = await t.db.query<{ next_block: string }>(
      "SELECT next_block::text FROM chain_cursors WHERE chain_id = $1 AND watcher = 'deposits'",
      [chain.chainId],
    );
    const next = BigInt(cursor[0]!.next_block);
    // The remembered block before the next range is replaced, but the watcher scans without checking first.
    await reorganise(2);
    await chain.testClient.mine({ blocks: 2 });
    await assert.rejects(w.scan(next, next), StaleRangeError);
    // The tick itself checks first and recovers.
    assert.ok((await w.tick()).reorg);
    assert.equal(await inSync(p), true);
  });
});

describe("applied blocks (the store)", () => {
  const chainId = 900_000 + Math.floor(Math.random() * 1_000);
  const block = (n: number, tag = "a"): { number: bigint; hash: Hex } => ({
    number: BigInt(n),
    hash: `0x${tag.repeat(2)}${n.toString(16).padStart(62, "0")}` as Hex,
  });

  test("a block number remembered under another hash is refused, and the caller's transaction rolled back", async () => {
    await remember(t.db, chainId, "settlement", [block(1)]);
    await remember(t.db, chainId, "settlement", [block(1)]);
    await assert.rejects(
      t.db.transaction(async (tx) => {
        await remember(tx, chainId, "settlement", [block(2)]);
        await remember(tx, chainId, "settlement", [block(1, "b")]);
      }),
      StaleRangeError,
    );
    const rows = await t.db.query<{ n: string }>(
      "SELECT block_number::text AS n FROM chain_applied_blocks WHERE chain_id = $1 ORDER BY 1",
      [chainId],
    );
    assert.deepEqual(
      rows.map((r) => r.n),
      ["1"],
    );
  });

  test("only the retention window below the newest remembered block is kept", async () => {
    const id = chainId + 1;
    for (const n of [1, 5, 10, 20, 30])
      await remember(t.db, id, "deposits", [block(n)], { retainBlocks: 10n });
    const rows = await t.db.query<{ n: string }>(
      "SELECT block_number::text AS n FROM chain_applied_blocks WHERE chain_id = $1 ORDER BY block_number",
      [id],
    );
    assert.deepEqual(
      rows.map((r) => r.n),
      ["20", "30"],
    );
  });

  test("one open reorganisation per watcher; recording it again returns it; reconciling twice is once", async () => {
    const id = chainId + 2;
    await remember(t.db, id, "settlement", [block(7), block(9)]);
    const seen = { forkBlock: 8n, depth: 3n, orphaned: [block(9)], beyondMemory: false };
    const epoch = await reorgEpoch(t.db, id, "settlement");
    const first = (await recordReorg(t.db, id, "settlement", seen))!;
    const again = (await recordReorg(t.db, id, "settlement", seen))!;
    assert.equal(again.id, first.id);
    assert.equal(await reorgEpoch(t.db, id, "settlement"), epoch + 1n);

    const summary: ReorgSummary = { compensations: 0, compensatedWei: 0n, shortfalls: [] };
    assert.equal(await markReconciled(t.db, first, summary), true);
    assert.equal(await markReconciled(t.db, first, summary), false);
    assert.equal(await reorgEpoch(t.db, id, "settlement"), epoch + 2n);
    // Another instance that saw the same blocks before they were forgotten records nothing.
    assert.equal(await recordReorg(t.db, id, "settlement", seen), null);
    assert.deepEqual(await listReorgs(t.db, { chainId: id, unreconciledOnly: true }), []);
  });

  test("findReorg orders blocks by number, not as text (9 < 10)", async () => {
    const id = chainId + 4;
    await remember(t.db, id, "deposits", [block(8), block(9), block(10)]);
    // A chain on which block 10 was replaced.
    const fake = {
      getBlockNumber: async () => 12n,
      getBlock: async ({ blockNumber }: { blockNumber: bigint }) => ({
        hash: blockNumber === 10n ? block(10, "c").hash : block(Number(blockNumber)).hash,
      }),
    } as unknown as Parameters<typeof findReorg>[1];
    assert.deepEqual(await findReorg(t.db, fake, id, "deposits"), {
      forkBlock: 10n,
      depth: 3n,
      orphaned: [block(10)],
      beyondMemory: false,
    });
  });

  test("findReorg reads one header when nothing changed", async () => {
    const id = chainId + 3;
    const tip = await chain.publicClient.getBlock();
    await remember(t.db, id, "deposits", [{ number: tip.number, hash: tip.hash }]);
    let headers = 0;
    const client = watcherClient(chain);
    const counting = {
      getBlockNumber: client.getBlockNumber,
      getBlock: ((args: Parameters<typeof client.getBlock>[0]) => {
        headers++;
        return client.getBlock(args);
      }) as typeof client.getBlock,
    };
    assert.equal(await findReorg(t.db, counting, id, "deposits"), null);
    assert.equal(headers, 1);
  });
});
