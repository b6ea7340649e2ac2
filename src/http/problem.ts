import { type Static, Type } from "@sinclair/typebox";

/** RFC 9457 problem details, the one error shape of the whole API. */
export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: "Stable snake_case error code" }),
    requestId: Type.String(),
  },
  { $id: "Problem", description: "RFC 9457 problem details" },
);
export type Problem = Static<typeof Problem>;

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  402: "Payment Required",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

/**
 * An expected refusal, carried up to the one error handler that renders it. `headers` lets a
 * refusal add what the client needs to recover (Retry-After, WWW-Authenticate, ...).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

export function problemBody(status: number, code: string, detail: string, requestId: string): Problem {
  return {
    type: `https://docs.gas-sponsorship.dev/problems/${code.replaceAll("_", "-")}`,
    title: TITLES[status] ?? "Error",
    status,
    detail,
    code,
    requestId,
  };
}

export const notFound = (what: string) => new ApiError(404, "not_found", `${what} not found`);
export const forbidden = (detail: string) => new ApiError(403, "forbidden", detail);
export const conflict = (detail: string) => new ApiError(409, "conflict", detail);
export const invalid = (detail: string) => new ApiError(400, "invalid_request", detail);
