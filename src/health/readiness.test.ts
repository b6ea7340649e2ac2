import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { FastifyBaseLogger } from "fastify";
import { createMetrics } from "../metrics/metrics.ts";
import { type CheckResult, overallStatus, type ReadinessProbe, readinessMonitor } from "./readiness.ts";

/** A logger that keeps (level, fields) of every line. */
function recordingLog() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) =>
    lines.push({ level, fields, msg });
  const log = { info: at("info"), warn: at("warn"), error: at("error") } as unknown as FastifyBaseLogger;
  return { log, lines };
}

function settable(name: string, initial: CheckResult) {
  let result = initial;
  const probe: ReadinessProbe = { name, check: async () => result };
  return { probe, set: (r: CheckResult) => (result = r) };
}

describe("overallStatus", () => {
  it("unavailable only when a check is down; degraded when one is degraded; ok otherwise", () => {
    assert.equal(
      overallStatus([{ status: "ok" }, { status: "degraded" }, { status: "down" }]),
      "unavailable",
    );
    assert.equal(overallStatus([{ status: "ok" }, { status: "degraded" }]), "degraded");
    assert.equal(overallStatus([{ status: "ok" }]), "ok");
    assert.equal(overallStatus([]), "ok");
  });
});

describe("readinessMonitor", () => {
  it("logs each transition once (warn worse, error critical, info recovered), not on every evaluation", async () => {
    const { log, lines } = recordingLog();
    const redis = settable("redis", { status: "ok" });
    const deposit = settable("chain:1:paymaster-deposit", { status: "ok" });
    const monitor = readinessMonitor([redis.probe, deposit.probe], {
      log,
      metrics: createMetrics({ version: "t" }),
    });
    await monitor.evaluate();
    assert.equal(lines.length, 0, "a first ok is not news");

    redis.set({ status: "degraded", detail: "Redis unreachable" });
    for (let i = 0; i < 3; i++) assert.equal((await monitor.evaluate()).status, "degraded");
    deposit.set({ status: "degraded", detail: "deposit short", critical: true });
    await monitor.evaluate();
    await monitor.evaluate();
    redis.set({ status: "ok" });
    deposit.set({ status: "ok" });
    await monitor.evaluate();
    await monitor.evaluate();

    assert.deepEqual(
      lines.map((l) => [l.level, l.msg, l.fields.check, l.fields.from, l.fields.to]),
      [
        ["warn", "readiness changed", "redis", "ok", "degraded"],
        ["error", "readiness changed", "chain:1:paymaster-deposit", "ok", "degraded!"],
        ["info", "readiness changed", "redis", "degraded", "ok"],
        ["info", "readiness changed", "chain:1:paymaster-deposit", "degraded!", "ok"],
      ],
    );
    assert.equal(lines[0]!.fields.detail, "Redis unreachable");
  });

  it("a first state that is not ok is logged, from unknown; a probe that throws is degraded", async () => {
    const { log, lines } = recordingLog();
    const db = settable("database", { status: "down", detail: "postgres is not answering" });
    const broken: ReadinessProbe = { name: "broken", check: () => Promise.reject(new Error("boom")) };
    const report = await readinessMonitor([db.probe, broken], {
      log,
      metrics: createMetrics({ version: "t" }),
    }).evaluate();
    assert.equal(report.status, "unavailable");
    assert.deepEqual(report.checks.broken, { status: "degraded", detail: "check failed: boom" });
    assert.deepEqual(
      lines.map((l) => [l.level, l.fields.check, l.fields.from, l.fields.to]),
      [
        ["warn", "database", "unknown", "down"],
        ["warn", "broken", "unknown", "degraded"],
      ],
    );
  });

  it("an evaluation that finishes after a newer one does not log a transition back", async () => {
    const { log, lines } = recordingLog();
    let release: () => void = () => {};
    let slow = true;
    const probe: ReadinessProbe = {
      name: "redis",
      check: () =>
        slow
          ? new Promise((resolve) => {
              release = () => resolve({ status: "ok" });
            })
          : Promise.resolve({ status: "degraded", detail: "Redis unreachable" }),
    };
    const monitor = readinessMonitor([probe], { log, metrics: createMetrics({ version: "t" }) });
    const older = monitor.evaluate();
    slow = false;
    await monitor.evaluate();
    release();
    await older;
    assert.deepEqual(
      lines.map((l) => [l.fields.from, l.fields.to]),
      [["unknown", "degraded"]],
    );
  });
});
