import { type TSchema, Type } from "@sinclair/typebox";

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
/**
 * A studio's own name for a record (a key, a rule, an allowlist entry): shown back as text, never
 * interpreted. No control characters, so that it cannot break a log line or an export.
 */
export const Name = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: "^[^\\u0000-\\u001f\\u007f]+$",
  description: "A name of your choosing, up to 128 characters",
});
export const ProjectId = Type.String({ pattern: "^[a-z0-9_-]{3,64}$", description: "Project id" });
export const ProjectParams = Type.Object(
  { id: Type.String({ maxLength: 200 }) },
  { additionalProperties: false },
);

/**
 * Response schemas for a route's successes. Its problem+json responses, one per status with an
 * example per code, are added from the route's entry in ROUTE_DOCS (src/http/openapi.ts).
 */
export function responses(ok: Record<number, TSchema>): Record<number, TSchema> {
  return { ...ok };
}

/** Security requirement objects for the OpenAPI document. */
export const bearer = [{ bearer: [] }];
