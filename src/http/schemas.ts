import { type TSchema, Type } from "@sinclair/typebox";
import { Problem } from "./problem.ts";

/** Shared pieces of the route schemas. */
export const Address = Type.String({
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "20-byte hex address",
  examples: ["0x5FbDB2315678afecb367f032d93F642f64180aa3"],
});
export const Selector = Type.String({
  pattern: "^0x[0-9a-fA-F]{8}$",
  description: "4-byte function selector",
  examples: ["0xa0712d68"],
});
export const Wei = Type.String({ pattern: "^(0|[1-9][0-9]{0,77})$", description: "Integer amount in wei" });
export const Timestamp = Type.String({ format: "date-time", description: "ISO 8601 UTC" });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);
export const ProjectId = Type.String({ pattern: "^[a-z0-9_-]{3,64}$", description: "Project id" });
export const ProjectParams = Type.Object(
  { id: Type.String({ maxLength: 200 }) },
  { additionalProperties: false },
);

const errorCodes = [400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503] as const;

/** Response schemas for a route: its successes plus the problem shape for every error status. */
export function responses(ok: Record<number, TSchema>, extra: number[] = []): Record<number, TSchema> {
  const out: Record<number, TSchema> = { ...ok };
  for (const status of [...errorCodes, ...extra]) {
    out[status] = {
      description: "Problem details (RFC 9457)",
      content: { "application/problem+json": { schema: Type.Ref(Problem.$id!) } },
    } as unknown as TSchema;
  }
  return out;
}

/** Security requirement objects for the OpenAPI document. */
export const bearer = [{ bearer: [] }];
