import { type Static, Type } from "@sinclair/typebox";
import { ERRORS, type ErrorCode } from "./catalogue.ts";

/** RFC 9457 problem details, the one error shape of the whole API. */
export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: "Stable snake_case error code" }),
    requestId: Type.String(),
    ruleId: Type.Optional(
      Type.String({
        description: "The project's policy rule that refused the request (policy refusals only)",
      }),
    ),
  },
  { $id: "Problem", description: "RFC 9457 problem details" },
);
export type Problem = Static<typeof Problem>;

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/**
 * An expected refusal, carried up to the one error handler that renders it. Its status and title
 * come from the catalogue; `headers` lets a refusal add what the client needs to recover
 * (Retry-After, WWW-Authenticate, ...).
 */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly headers: Record<string, string> = {},
    /** Members added to the problem body (RFC 9457 extensions), e.g. the refusing rule's id. */
    readonly extensions: { ruleId?: string } = {},
  ) {
    super(detail);
    this.status = ERRORS[code].status;
  }
}

export function problemBody(code: ErrorCode, detail: string, requestId: string): Problem {
  const spec = ERRORS[code];
  return {
    type: `https://docs.gas-sponsorship.dev/problems/${code.replaceAll("_", "-")}`,
    title: spec.title,
    status: spec.status,
    detail,
    code,
    requestId,
  };
}

export const notFound = (what: string) => new ApiError("not_found", `${what} not found`);
export const forbidden = (detail: string) => new ApiError("forbidden", detail);
export const conflict = (detail: string) => new ApiError("conflict", detail);
export const invalid = (detail: string) => new ApiError("invalid_request", detail);

/** The 429 for a request over its budget, with the headers a client needs to back off. */
export function rateLimited(
  refusal: { perMinute: number; windowSec: number; retryAfterSec: number },
  who = "this API key",
): ApiError {
  const { perMinute, windowSec, retryAfterSec } = refusal;
  return new ApiError(
    "rate_limited",
    `${who} allows ${perMinute} requests per ${windowSec === 60 ? "minute" : `${windowSec} s`}`,
    {
      "retry-after": String(retryAfterSec),
      "ratelimit-policy": `${perMinute};w=${windowSec}`,
      ratelimit: `limit=${perMinute}, remaining=0, reset=${retryAfterSec}`,
    },
  );
}
