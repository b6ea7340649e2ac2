import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deadline } from "../src/webhooks/deadline.ts";
import { webhookSender } from "../src/webhooks/egress.ts";
import { signedHeaders } from "../src/webhooks/signing.ts";
import { seedProject, startTestApp } from "../test/support/app.ts";
import { processCpuMs } from "./processes.ts";
import { median } from "./stats.ts";
import { startBenchReceiver } from "./webhooks.ts";

/**
 * `npm run bench:approval`: what one approval webhook exchange costs this process, against what
 * it costs the receiver. The bench receiver (bench/receiver.ts, a process of its own, approving
 * everything) is asked by `concurrency` callers at once, two ways, alternated for several rounds:
 *
 * - "HTTP exchange alone": the service's webhook sender (webhooks/egress.ts, undici) posting a
 *   fixed, already signed body and reading the answer: the least a Node client pays per request;
 * - "approval exchange": the service's approval gate deciding a sponsorship (webhooks/approval.ts):
 *   the body, its signature, the deadline, the exchange, reading and judging the answer, the
 *   metrics. Its settings are a real project's, written through the API to an embedded store and
 *   cached as in the service. The receiver answers without reading the request;
 * - "approval exchange, receiver verifying": the same, to a receiver that checks the signature
 *   and parses the body before it approves, as a studio's must.
 *
 * It prints, per way, the median over the rounds of calls per second and of the CPU per call of
 * this process (less what it spends idle, measured first) and of the receiver. `npm run bench` prices the same exchange inside authorize (the
 * "approval webhook alone" scenario with BENCH_SKIP_EVENTS=1), where it also changes how requests
 * batch; this takes the exchange apart from that. Knobs: BENCH_CONCURRENCY (50),
 * BENCH_DURATION_SEC (5 per round), BENCH_ROUNDS (3).
 */

const concurrency = positive(process.env.BENCH_CONCURRENCY, 50);
const durationSec = positive(process.env.BENCH_DURATION_SEC, 5);
const rounds = positive(process.env.BENCH_ROUNDS, 3);

function positive(value: string | undefined, fallback: number): number {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error("BENCH_* settings are positive whole numbers");
  return n;
}

/** This process's CPU with nothing to do, µs per second (measured before the rounds). */
let idleUsPerSec = 0;

interface Round {
  callsPerSec: number;
  ownUs: number;
  receiverUs: number;
}

const dataDir = mkdtempSync(join(tmpdir(), "gss-bench-approval-"));
const receiver = await startBenchReceiver(dataDir);
const t = await startTestApp({ logLevel: "warn" });
try {
  // Two projects: one asks the receiver's bare route, the other its verifying one.
  const approvalWebhook = async (path: string) => {
    const p = await seedProject(t);
    const put = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/approval-webhook`,
      token: p.ownerToken,
      payload: { url: `${receiver.url}${path}`, timeoutMs: 2000, failMode: "closed" },
    });
    if (put.statusCode !== 200) throw new Error(`approval webhook not set: ${put.body}`);
    return { projectId: p.projectId, secret: (put.json() as { secret: string }).secret };
  };
  const bare = await approvalWebhook("/approve");
  const verifying = await approvalWebhook("/approve-verified");
  await fetch(`${receiver.url}/secret`, { method: "POST", body: verifying.secret });
  const secret = bare.secret;

  const request = {
    projectId: bare.projectId,
    mode: "call" as const,
    chainId: 14601,
    sender: `0x${"ab".repeat(20)}`,
    calls: [{ target: `0x${"cd".repeat(20)}`, selector: "0x40c10f19" }],
    maxGasCostWei: 600_000_000_000_000n,
    maxTotalGas: 200_000n,
    clientNonce: null,
  };
  const approvalOf = (projectId: string) => async () => {
    const outcome = await t.services.approvals.check({ ...request, projectId });
    if (outcome.kind !== "approved" || outcome.by !== "receiver") {
      throw new Error(`the receiver did not approve: ${JSON.stringify(outcome)}`);
    }
  };
  // The same request the gate sends, made once: only the exchange is left per call.
  const send = webhookSender("allow");
  const body = JSON.stringify({ id: "apr_fixed", type: "sponsorship.approval", data: request }, (_k, v) =>
    typeof v === "bigint" ? v.toString() : v,
  );
  const headers = signedHeaders([secret], "apr_fixed", Math.floor(Date.now() / 1000), body);
  const exchange = async () => {
    const { signal, clear } = deadline(2000);
    try {
      const res = await send(`${receiver.url}/approve`, { headers, body, signal, keepAnswerUpTo: 16 * 1024 });
      if (res.status !== 200 || res.text === null) throw new Error("no approval");
    } finally {
      clear();
    }
  };

  const ways: [string, () => Promise<void>][] = [
    ["HTTP exchange alone", exchange],
    ["approval exchange", approvalOf(bare.projectId)],
    ["approval exchange, receiver verifying", approvalOf(verifying.projectId)],
  ];
  // A warm-up of each, then the rounds, alternated so that both meet the same machine.
  for (const [, call] of ways) await drive(call, 1);
  // What this process spends with no call at all (the app's background loops: the webhook
  // worker's poll, the fee oracle), taken off each round's CPU.
  const idleBefore = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const idle = process.cpuUsage(idleBefore);
  idleUsPerSec = (idle.user + idle.system) / 2;
  const results = new Map<string, Round[]>(ways.map(([name]) => [name, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [name, call] of r % 2 === 0 ? ways : [...ways].reverse()) {
      results.get(name)!.push(await drive(call, durationSec));
    }
  }

  console.log(
    `\napproval webhook exchange, ${concurrency} at once, ${rounds} rounds of ${durationSec} s each (medians)`,
  );
  console.log("| way | calls/s | this process µs/call | receiver µs/call | this ÷ receiver |");
  console.log("|---|--:|--:|--:|--:|");
  for (const [name, rows] of results) {
    const own = median(rows.map((x) => x.ownUs));
    const recv = median(rows.map((x) => x.receiverUs));
    console.log(
      `| ${name} | ${median(rows.map((x) => x.callsPerSec)).toFixed(0)} | ${own.toFixed(1)} | ${recv.toFixed(1)} | ${(own / recv).toFixed(2)} |`,
    );
  }
} finally {
  await t.close();
  await receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
}

/** Runs `call` from `concurrency` loops for `seconds`; CPU per call of this process and the receiver. */
async function drive(call: () => Promise<void>, seconds: number): Promise<Round> {
  let calls = 0;
  let stop = false;
  const ownBefore = process.cpuUsage();
  const receiverBefore = processCpuMs(receiver.child.pid);
  const started = performance.now();
  const timer = setTimeout(() => {
    stop = true;
  }, seconds * 1000);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!stop) {
        await call();
        calls++;
      }
    }),
  );
  clearTimeout(timer);
  const elapsedSec = (performance.now() - started) / 1000;
  const own = process.cpuUsage(ownBefore);
  return {
    callsPerSec: calls / elapsedSec,
    ownUs: (own.user + own.system - idleUsPerSec * elapsedSec) / calls,
    receiverUs: ((processCpuMs(receiver.child.pid) - receiverBefore) * 1000) / calls,
  };
}
