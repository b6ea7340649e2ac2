/**
 * The approval webhook: before the service signs a sponsorship, a project that configured one is
 * asked, with a signed POST (signing.ts), whether to sponsor this operation. It answers 2xx with
 * `{"approve": true}` or `{"approve": false, "reason": "..."}`; anything else (another status, a
 * body that is not that, no answer within the project's timeout) is a failure, and the project's
 * fail mode decides: `open` sponsors, `closed` refuses with `approval_unavailable`.
 *
 * Projects without an approval webhook pay nothing per request: their settings are cached like
 * the project's TTL (one read per KEY_CACHE_TTL_MS per instance), and a change made through this
 * instance applies at once here and within the cache lifetime elsewhere.
 */

import { readThroughCache } from "../caching.ts";
import type { Queryable } from "../db/db.ts";
import type { ErrorCode } from "../http/catalogue.ts";
import type { ApprovalCallResult, Metrics } from "../metrics/metrics.ts";
import type { Keyring } from "../secrets/envelope.ts";
import { randomHex } from "../sponsor/ids.ts";
import { deadline } from "./deadline.ts";
import {
  NO_PUBLIC_ADDRESS,
  noPublicAddress,
  sendFailure,
  type WebhookSend,
  webhookSender,
} from "./egress.ts";
import { signedHeaders } from "./signing.ts";
import { type ApprovalSettings, approvalBinding, openSecret, readSettings } from "./store.ts";

export interface ApprovalRequest {
  projectId: string;
  /** `call`: POST /sponsor/authorize; `operation`: ERC-7677 pm_getPaymasterData. */
  mode: "call" | "operation";
  chainId: number;
  sender: string;
  calls: { target: string; selector: string }[];
  maxGasCostWei: bigint;
  maxTotalGas: bigint;
  entryPoint?: string;
  clientNonce?: string | null;
}

export type ApprovalOutcome =
  | { kind: "approved"; by: "no_webhook" | "receiver" | "fail_open"; failure?: string }
  | { kind: "refused"; code: Extract<ErrorCode, "approval_denied" | "approval_unavailable">; detail: string };

export interface ApprovalGate {
  check(req: ApprovalRequest): Promise<ApprovalOutcome>;
  /** Drops a project's cached settings (after a change made through this instance). */
  forget(projectId: string): void;
}

const MAX_ANSWER_BYTES = 16 * 1024;
export const MAX_REASON_LENGTH = 256;

export function approvalGate(deps: {
  db: Queryable;
  cacheTtlMs: number;
  now: () => number;
  /** What the request is sent with (webhooks/egress.ts: the guard against private targets). */
  send?: WebhookSend;
  /** Where calls are counted by result and timed; nothing is counted without it. */
  metrics?: Pick<Metrics, "approvalCall">;
  /** Opens the approval webhooks' signing secrets (stored sealed, webhooks/store.ts). */
  keyring: Keyring;
}): ApprovalGate {
  const send: WebhookSend = deps.send ?? webhookSender("allow");
  // Requests that miss together share one read (caching.ts).
  const settingsCache = readThroughCache({
    max: 10_000,
    ttlMs: deps.cacheTtlMs,
    now: deps.now,
    load: async (projectId): Promise<ApprovalSettings | null> =>
      (await readSettings(deps.db, projectId)).approval,
  });
  return {
    async check(req) {
      const settings = await settingsCache.get(req.projectId);
      if (!settings) return { kind: "approved", by: "no_webhook" };
      // Nothing is sent unsigned: a secret that cannot be opened is a failure to ask, which the
      // project's fail mode decides like any other.
      const opened = openSecret(deps.keyring, settings.sealedSecret, approvalBinding(req.projectId));
      if (!opened.ok) {
        deps.metrics?.approvalCall("error", 0);
        return decide(settings.failMode, {
          kind: "failure",
          why: "its stored signing secret cannot be decrypted by the service",
        });
      }
      const started = performance.now();
      const { answer, result } = await ask(send, settings, opened.secret, req, deps.now);
      deps.metrics?.approvalCall(result, (performance.now() - started) / 1000);
      return decide(settings.failMode, answer);
    },
    forget: settingsCache.forget,
  };
}

/** What the receiver said, or why it said nothing usable. */
export type Answer =
  | { kind: "approve" }
  | { kind: "deny"; reason: string | null }
  | { kind: "failure"; why: string };

/** The outcome for an answer under a fail mode. Pure. */
export function decide(failMode: "open" | "closed", answer: Answer): ApprovalOutcome {
  switch (answer.kind) {
    case "approve":
      return { kind: "approved", by: "receiver" };
    case "deny":
      return {
        kind: "refused",
        code: "approval_denied",
        detail: answer.reason
          ? `the project's approval webhook denied this sponsorship: ${answer.reason}`
          : "the project's approval webhook denied this sponsorship",
      };
    case "failure":
      return failMode === "open"
        ? { kind: "approved", by: "fail_open", failure: answer.why }
        : {
            kind: "refused",
            code: "approval_unavailable",
            detail: `the project's approval webhook did not answer usably (${answer.why}) and the project fails closed`,
          };
  }
}

/** Reads a receiver's answer. Pure: only a 2xx `{"approve": boolean, "reason"?: string}` counts. */
export function parseAnswer(status: number, text: string): Answer {
  if (status < 200 || status > 299) return { kind: "failure", why: `HTTP ${status}` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { kind: "failure", why: "the answer is not JSON" };
  }
  const approve = (body as { approve?: unknown } | null)?.approve;
  if (typeof approve !== "boolean") return { kind: "failure", why: "the answer has no boolean `approve`" };
  if (approve) return { kind: "approve" };
  const reason = (body as { reason?: unknown }).reason;
  return {
    kind: "deny",
    reason:
      typeof reason === "string" && reason.trim() !== ""
        ? printable(reason).slice(0, MAX_REASON_LENGTH)
        : null,
  };
}

/** The request body: the operation as the service is about to sign it. */
export function approvalBody(id: string, nowMs: number, req: ApprovalRequest): string {
  return JSON.stringify({
    id,
    type: "sponsorship.approval",
    timestamp: new Date(nowMs).toISOString(),
    projectId: req.projectId,
    data: {
      mode: req.mode,
      chainId: req.chainId,
      sender: req.sender,
      calls: req.calls,
      maxGasCost: req.maxGasCostWei.toString(),
      maxTotalGas: req.maxTotalGas.toString(),
      ...(req.entryPoint ? { entryPoint: req.entryPoint } : {}),
      ...(req.clientNonce ? { clientNonce: req.clientNonce } : {}),
    },
  });
}

/** The metrics' word for a receiver's answer; a failed request is a timeout or an error (ask). */
function resultOf(answer: Answer): { answer: Answer; result: ApprovalCallResult } {
  return {
    answer,
    result: answer.kind === "approve" ? "approved" : answer.kind === "deny" ? "denied" : "error",
  };
}

async function ask(
  send: WebhookSend,
  settings: ApprovalSettings,
  secret: string,
  req: ApprovalRequest,
  now: () => number,
): Promise<{ answer: Answer; result: ApprovalCallResult }> {
  const id = `apr_${randomHex(16)}`;
  const nowMs = now();
  const body = approvalBody(id, nowMs, req);
  // One deadline for the whole exchange, the answer's body included (deadline.ts: a timer of
  // our own, which a garbage collection cannot take away mid-request).
  const { signal, clear } = deadline(settings.timeoutMs);
  try {
    const res = await send(settings.url, {
      headers: {
        ...signedHeaders([secret], id, Math.floor(nowMs / 1000), body),
        "user-agent": "gas-sponsorship-webhooks/1",
      },
      body,
      signal,
      keepAnswerUpTo: MAX_ANSWER_BYTES,
    });
    // An answer past the cap is read as no answer at all (not JSON).
    return resultOf(parseAnswer(res.status, res.text ?? ""));
  } catch (err) {
    const failure = sendFailure(err);
    if (failure.kind === "timeout") {
      return {
        answer: { kind: "failure", why: `no answer within ${settings.timeoutMs} ms` },
        result: "timeout",
      };
    }
    const why = noPublicAddress(failure) ? NO_PUBLIC_ADDRESS : "the request failed";
    return { answer: { kind: "failure", why }, result: "error" };
  } finally {
    clear();
  }
}

/** Control characters become spaces: the reason ends up in a problem+json detail and in logs. */
function printable(text: string): string {
  return [...text].map((c) => (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? " " : c)).join("");
}
