/**
 * Readiness: is each configured paymaster a contract that will honour what this instance signs?
 * A SponsorPaymaster at the configured address, on the configured EntryPoint, whose `signer()` is
 * this instance's key (operator/check.ts judges; the same verdicts as `npm run paymaster -- check`).
 *
 * A mismatch is degraded and critical, not down: every instance shares the configuration, so
 * taking them all out of the load balancer would not help, and the log line at error level says
 * what to fix. A signer that is the contract's *previous* signer during a rotation window is
 * reported the same way, with the time left. An RPC that does not answer is degraded (unknown).
 *
 * The contract's identity changes only when an operator acts, so a verdict is kept for
 * `cacheMs` (a readiness evaluation reads the chain at most once per interval per paymaster).
 */
import type { Address } from "viem";
import type { ChainClient } from "../chains/rpc.ts";
import type { LiveEntryPoint } from "../config.ts";
import { judgeIdentity } from "../operator/check.ts";
import { sponsorPaymasterAbi } from "../paymaster/abi.ts";
import type { CheckResult, ReadinessProbe } from "./readiness.ts";

export const PAYMASTER_IDENTITY_CACHE_MS = 15_000;

export function paymasterIdentityProbe(input: {
  chainId: number;
  pair: LiveEntryPoint;
  client: ChainClient;
  signer: Address;
  now?: () => number;
  cacheMs?: number;
}): ReadinessProbe {
  const { chainId, pair, client, signer } = input;
  const now = input.now ?? Date.now;
  const cacheMs = input.cacheMs ?? PAYMASTER_IDENTITY_CACHE_MS;
  const suffix = pair.version === "0.7" ? "" : `:${pair.version}`;
  let cached: { result: CheckResult; atMs: number } | null = null;
  return {
    name: `chain:${chainId}:paymaster${suffix}`,
    async check() {
      if (cached && now() - cached.atMs < cacheMs) return cached.result;
      const result = await readAndJudge(client, pair, signer).catch(
        (err: Error): CheckResult => ({
          status: "degraded",
          detail: `could not read the paymaster ${pair.paymaster}: ${err.message.split("\n")[0]}`,
        }),
      );
      // An unreadable chain is asked again at the next evaluation, not after the cache time.
      cached = result.detail?.startsWith("could not read") ? null : { result, atMs: now() };
      return result;
    },
  };
}

async function readAndJudge(
  client: ChainClient,
  pair: LiveEntryPoint,
  signer: Address,
): Promise<CheckResult> {
  const paymaster = pair.paymaster as Address;
  const [code, block] = await Promise.all([
    client.getCode({ address: paymaster }),
    client.getBlock({ blockTag: "latest" }),
  ]);
  const hasCode = code !== undefined && code !== "0x";
  const read = <T>(functionName: "entryPoint" | "signer" | "previousSigner" | "previousSignerValidUntil") =>
    client
      .readContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName })
      .then((v) => v as T)
      .catch(() => null);
  const [entryPoint, current, previousSigner, previousValidUntil] = hasCode
    ? await Promise.all([
        read<Address>("entryPoint"),
        read<Address>("signer"),
        read<Address>("previousSigner"),
        read<number>("previousSignerValidUntil"),
      ])
    : [null, null, null, null];
  const findings = judgeIdentity(
    {
      paymaster,
      hasCode,
      entryPoint,
      signer: current,
      previous:
        previousSigner === null || previousValidUntil === null
          ? null
          : { signer: previousSigner, validUntilSec: Number(previousValidUntil) },
      latestTimestampSec: Number(block.timestamp),
    },
    {
      entryPoint: pair.entryPoint as Address,
      version: pair.version,
      signer,
      signerSource: "this instance's signer key",
    },
  );
  const failures = findings.filter((f) => f.level === "fail").map((f) => f.text);
  if (failures.length > 0) return { status: "degraded", critical: true, detail: failures.join("; ") };
  return { status: "ok", detail: `signer() is ${signer} on EntryPoint v${pair.version}` };
}
