/**
 * Where refusals are caught: an onSend hook on the sponsorship routes only (POST
 * /sponsor/authorize, POST /sponsor/check, POST /rpc). The root's onSend hook (metrics/http.ts)
 * has already read the refusal's stable code from what the client receives; a granted request has
 * none, and this hook returns at its first line. A refusal is attributed to a project only when
 * the caller authenticated with one of its API keys: an unauthenticated request could name any
 * project, so it is counted in the metrics (gss_authorize_outcomes_total) and nowhere else.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { RefusalRecorder } from "./recorder.ts";

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const SELECTOR = /^0x[0-9a-fA-F]{8}$/;
const QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;
const MAX_CHAIN_ID = 2 ** 53 - 1;

/** The params of a refused JSON-RPC call, noted by the /rpc route (its body is text). */
const askedOverRpc = new WeakMap<FastifyRequest, unknown[]>();

export function noteRpcParams(request: FastifyRequest, params: unknown[]): void {
  askedOverRpc.set(request, params);
}

export function captureRefusals(app: FastifyInstance, recorder: RefusalRecorder, now: () => number): void {
  app.addHook("onSend", (request, reply, payload, done) => {
    if (request.errorCode === null) return done(null, payload);
    const principal = request.principal;
    if (principal?.kind !== "apiKey") return done(null, payload);
    const answer = answerOf(payload);
    recorder.record({
      projectId: principal.projectId,
      atMs: now(),
      code: request.errorCode,
      status: reply.statusCode,
      rpcCode: answer.rpcCode,
      route: routeOf(request),
      apiKeyId: principal.keyId,
      ruleId: answer.ruleId,
      requestId: String(request.id),
      ...askedOf(request),
    });
    done(null, payload);
  });
}

function routeOf(request: FastifyRequest): string {
  if (request.routeOptions.url === "/rpc") return request.rpcMethod ?? "rpc";
  return request.routeOptions.url === "/sponsor/check" ? "check" : "authorize";
}

/** The rule id and the JSON-RPC error code of the refusal, read from the (small) answer. */
function answerOf(payload: unknown): { ruleId: string | null; rpcCode: number | null } {
  if (typeof payload !== "string" || payload.length > 8192) return { ruleId: null, rpcCode: null };
  try {
    const body = JSON.parse(payload) as {
      ruleId?: unknown;
      error?: { code?: unknown; data?: { ruleId?: unknown } };
    };
    const rule = body.error ? body.error.data?.ruleId : body.ruleId;
    const rpcCode = body.error?.code;
    return {
      ruleId: typeof rule === "string" ? rule.slice(0, 128) : null,
      rpcCode: Number.isSafeInteger(rpcCode) ? (rpcCode as number) : null,
    };
  } catch {
    return { ruleId: null, rpcCode: null };
  }
}

type Asked = Pick<
  Parameters<RefusalRecorder["record"]>[0],
  "sender" | "target" | "selector" | "chainId" | "estimatedGas"
>;
const NOTHING: Asked = { sender: null, target: null, selector: null, chainId: null, estimatedGas: null };

/**
 * What the caller asked for, taken only from fields that have their proper shape: the REST body
 * (absent when the refusal came before it was read, as a 429 does), or the JSON-RPC call's user
 * operation, chain and gas limits.
 */
function askedOf(request: FastifyRequest): Asked {
  const params = askedOverRpc.get(request);
  if (params) return askedOverRpcOf(params);
  const body = request.body;
  if (typeof body !== "object" || body === null || Array.isArray(body)) return NOTHING;
  const b = body as Record<string, unknown>;
  return {
    sender: text(b.user, ADDRESS),
    target: text(b.target, ADDRESS),
    selector: text(b.selector, SELECTOR),
    chainId: Number.isSafeInteger(b.chainId) && (b.chainId as number) > 0 ? (b.chainId as number) : null,
    estimatedGas:
      Number.isSafeInteger(b.estimatedGas) && (b.estimatedGas as number) >= 0 ? String(b.estimatedGas) : null,
  };
}

function askedOverRpcOf(params: unknown[]): Asked {
  const [op, , chain] = params;
  const o = typeof op === "object" && op !== null ? (op as Record<string, unknown>) : {};
  const chainId = typeof chain === "string" && QUANTITY.test(chain) ? Number(BigInt(chain)) : null;
  let gas = 0n;
  let anyGas = false;
  for (const field of GAS_FIELDS) {
    const value = o[field];
    if (typeof value === "string" && QUANTITY.test(value)) {
      gas += BigInt(value);
      anyGas = true;
    }
  }
  return {
    sender: text(o.sender, ADDRESS),
    target: null,
    selector: null,
    chainId: chainId !== null && chainId > 0 && chainId <= MAX_CHAIN_ID ? chainId : null,
    estimatedGas: anyGas ? gas.toString() : null,
  };
}

/** The operation's gas limits, whose sum is what authorize calls estimatedGas. */
const GAS_FIELDS = [
  "callGasLimit",
  "verificationGasLimit",
  "preVerificationGas",
  "paymasterVerificationGasLimit",
  "paymasterPostOpGasLimit",
];

const text = (value: unknown, shape: RegExp) =>
  typeof value === "string" && shape.test(value) ? value.toLowerCase() : null;
