import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { type Hex, pad, toHex } from "viem";
import {
  type AppliedBlock,
  assertLinked,
  type ChainReorg,
  locateFork,
  reorgHealth,
  StaleRangeError,
} from "./applied-blocks.ts";

const hash = (n: bigint, fork = 0): Hex => pad(toHex(n * 1000n + BigInt(fork)), { size: 32 });

/** A chain that forked: blocks below `forkAt` kept their hash, those at or above it changed. */
function forkedChain(forkAt: bigint) {
  let calls = 0;
  return {
    calls: () => calls,
    isCanonical: async (b: AppliedBlock) => {
      calls++;
      return b.hash === (b.number < forkAt ? hash(b.number) : hash(b.number, 1));
    },
  };
}

const remembered = (numbers: number[]): AppliedBlock[] =>
  numbers.map((n) => ({ number: BigInt(n), hash: hash(BigInt(n)) }));

describe("locateFork", () => {
  it("costs one header when the newest remembered block is unchanged", async () => {
    const chain = forkedChain(1_000n);
    assert.equal(await locateFork(remembered([3, 10, 11, 40]), 100n, chain.isCanonical), null);
    assert.equal(chain.calls(), 1);
  });

  it("finds the newest surviving block and returns every remembered block above it as orphaned", async () => {
    const chain = forkedChain(12n);
    const reorg = await locateFork(remembered([3, 10, 11, 15, 20]), 100n, chain.isCanonical);
    assert.deepEqual(reorg, {
      forkBlock: 12n,
      depth: 89n,
      orphaned: remembered([15, 20]),
      beyondMemory: false,
    });
  });

  it("flags a fork below every remembered block", async () => {
    const chain = forkedChain(2n);
    const reorg = await locateFork(remembered([5, 6, 9]), 100n, chain.isCanonical);
    assert.equal(reorg?.beyondMemory, true);
    assert.equal(reorg?.forkBlock, 5n);
    assert.equal(reorg?.depth, 96n);
    assert.equal(reorg?.orphaned.length, 3);
  });

  it("does not judge blocks the RPC does not have yet, but orphans them with their ancestors", async () => {
    const calm = forkedChain(1_000n);
    assert.equal(await locateFork(remembered([5, 8, 30]), 20n, calm.isCanonical), null);
    const forked = forkedChain(7n);
    const reorg = await locateFork(remembered([5, 8, 30]), 20n, forked.isCanonical);
    assert.deepEqual(
      reorg?.orphaned.map((b) => b.number),
      [8n, 30n],
    );
    assert.equal(await locateFork(remembered([25, 30]), 20n, forked.isCanonical), null);
  });

  it("matches a linear scan and stays within 1 + ceil(log2 n) headers (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 300 }),
        fc.integer({ min: 0, max: 5_100 }),
        async (numbers, forkAt) => {
          numbers.sort((a, b) => a - b);
          const blocks = remembered(numbers);
          const chain = forkedChain(BigInt(forkAt));
          const reorg = await locateFork(blocks, 10_000n, chain.isCanonical);
          const expected = blocks.filter((b) => b.number >= BigInt(forkAt));
          assert.deepEqual(reorg?.orphaned ?? [], expected);
          if (reorg) {
            const survivors = blocks.filter((b) => b.number < BigInt(forkAt));
            const forkBlock =
              survivors.length > 0 ? survivors[survivors.length - 1]!.number + 1n : blocks[0]!.number;
            assert.equal(reorg.forkBlock, forkBlock);
            assert.equal(reorg.beyondMemory, survivors.length === 0);
            // Within memory the fork block never lies above the real fork: re-reading from it misses nothing.
            if (!reorg.beyondMemory) assert.ok(reorg.forkBlock <= BigInt(forkAt));
          }
          assert.ok(chain.calls() <= 1 + Math.ceil(Math.log2(blocks.length)));
        },
      ),
    );
  });
});

describe("assertLinked", () => {
  const header = (n: bigint, fork = 0, parentFork = fork) => ({
    number: n,
    hash: hash(n, fork),
    parentHash: hash(n - 1n, parentFork),
  });

  it("accepts headers that form one chain continuing the remembered block", () => {
    assertLinked([header(5n), header(6n), header(7n)], hash(4n));
    assertLinked([header(5n)], null);
    assertLinked([], hash(4n));
  });

  it("refuses a range whose first block does not continue the remembered one", () => {
    assert.throws(() => assertLinked([header(5n, 1, 1), header(6n, 1)], hash(4n)), StaleRangeError);
  });

  it("refuses a range read across a reorganisation", () => {
    assert.throws(
      () => assertLinked([header(5n), header(6n, 1, 1), header(7n, 1)], hash(4n)),
      StaleRangeError,
    );
  });
});

describe("reorgHealth", () => {
  const reorg = (over: Partial<ChainReorg>): ChainReorg => ({
    id: 1,
    chainId: 14601,
    watcher: "deposits",
    forkBlock: 120n,
    depth: 3n,
    orphaned: [],
    beyondMemory: false,
    detectedAt: "2025-01-01T00:00:00.000Z",
    reconciledAt: "2025-01-01T00:00:01.000Z",
    summary: { compensations: 1, compensatedWei: 5n, shortfallWei: 0n, shortfalls: [] },
    ...over,
  });

  it("is ok when nothing happened within the window", () => {
    assert.deepEqual(reorgHealth({ unreconciled: [], recent: [], windowSec: 86_400 }), {
      status: "ok",
      detail: "no reorganisation deeper than the confirmation depth in the last 24 h",
    });
  });

  it("is degraded while a reorganisation is open", () => {
    const open = reorg({ reconciledAt: null, summary: null });
    const health = reorgHealth({ unreconciled: [open], recent: [open], windowSec: 86_400 });
    assert.equal(health.status, "degraded");
    assert.equal(health.detail, "deposits: reorganisation at block 120 (depth 3) not reconciled yet");
  });

  it("is degraded within the window after one, naming the fork, depth and shortfall", () => {
    const owed = reorg({
      summary: {
        compensations: 1,
        compensatedWei: 5n,
        shortfallWei: 7n,
        shortfalls: [{ projectId: "p", shortfallWei: 7n }],
      },
    });
    const health = reorgHealth({ unreconciled: [], recent: [owed], windowSec: 3_600 });
    assert.equal(health.status, "degraded");
    assert.equal(
      health.detail,
      "1 reorganisation deeper than the confirmation depth in the last 1 h (latest: deposits, block 120, depth 3); 7 wei could not be taken back from tanks that had spent it",
    );
  });
});
