import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type LoopState, redactUrls } from "./poll-loop.ts";
import { confirmedHead } from "./rpc.ts";
import { MAX_LAG_BLOCKS, watcherHealth } from "./watchers.ts";

const healthy: LoopState = {
  running: true,
  lastTickAt: 1,
  lastSuccessAt: 1,
  lastError: null,
  consecutiveFailures: 0,
};

describe("watcher readiness", () => {
  it("is ok when the cursor has caught up with the confirmed head", () => {
    assert.deepEqual(watcherHealth({ safe: 100n, cursor: 101n, loop: healthy, note: null }), {
      status: "ok",
      detail: "0 blocks behind the confirmed head",
    });
    assert.equal(
      watcherHealth({ safe: 100n, cursor: 100n, loop: healthy, note: null }).detail,
      "1 block behind the confirmed head",
    );
  });

  it("is degraded when far behind, when the last tick failed, when the lag is unknown, or with a caveat", () => {
    const far = watcherHealth({
      safe: 1000n,
      cursor: 1000n - MAX_LAG_BLOCKS - 1n,
      loop: healthy,
      note: null,
    });
    assert.equal(far.status, "degraded");
    const failed = watcherHealth({
      safe: 5n,
      cursor: 6n,
      loop: { ...healthy, lastError: "fetch failed" },
      note: null,
    });
    assert.deepEqual(failed, {
      status: "degraded",
      detail: "0 blocks behind the confirmed head; last tick failed: fetch failed",
    });
    assert.equal(watcherHealth({ safe: null, cursor: 6n, loop: healthy, note: null }).status, "degraded");
    assert.equal(watcherHealth({ safe: 5n, cursor: null, loop: healthy, note: null }).status, "degraded");
    assert.equal(
      watcherHealth({ safe: 5n, cursor: 6n, loop: healthy, note: "no tracing" }).status,
      "degraded",
    );
  });

  it("never trusts a block above head − confirmations", () => {
    assert.equal(confirmedHead(10n, 2), 8n);
    assert.equal(confirmedHead(10n, 0), 10n);
    assert.equal(confirmedHead(1n, 2), null);
  });
});

describe("redactUrls", () => {
  it("keeps RPC URLs (and the API keys they often carry) out of readiness and logs", () => {
    assert.equal(
      redactUrls("HTTP request failed. URL: https://rpc.example/v2/SECRETKEY status 401"),
      "HTTP request failed. URL: [url] status 401",
    );
  });
});
