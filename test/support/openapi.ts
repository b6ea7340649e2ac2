import assert from "node:assert/strict";
import AjvModule from "ajv";
import formatsModule from "ajv-formats";
import type { LightMyRequestResponse } from "fastify";

const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

/**
 * Checks every response a test receives against the OpenAPI document the app publishes: the
 * route (by template), the status (documented or not) and the body (against its schema).
 */
export function responseValidator(spec: Record<string, unknown>): Validate {
  // One per published document: a test file's apps publish the same one, and its schemas then
  // compile once for all of them.
  const text = JSON.stringify(spec);
  let validate = byDocument.get(text);
  if (!validate) {
    validate = validatorOf(spec);
    byDocument.set(text, validate);
  }
  return validate;
}

type Validate = (method: string, url: string, res: LightMyRequestResponse) => void;
const byDocument = new Map<string, Validate>();

function validatorOf(spec: Record<string, unknown>): Validate {
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(spec, "openapi");
  const paths = spec.paths as Record<string, Record<string, { responses?: Record<string, unknown> }>>;
  const templates = Object.keys(paths).map((template) => ({
    template,
    regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`),
  }));
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();

  return (method: string, url: string, res: LightMyRequestResponse) => {
    const path = url.split("?")[0]!.replace(/\/$/, "") || "/";
    const match = templates.find((t) => t.regex.test(path));
    if (!match || path.startsWith("/docs")) return; // unknown routes answer a problem; checked by tests
    const op = paths[match.template]?.[method.toLowerCase()];
    if (!op) return;
    const status = String(res.statusCode);
    const documented = op.responses?.[status] as { content?: Record<string, unknown> } | undefined;
    assert.ok(
      documented,
      `${method} ${match.template} answered ${status}, which the OpenAPI does not document`,
    );
    const mediaType = Object.keys(documented.content ?? {})[0];
    // Only JSON bodies have a schema to check here (GET /metrics answers Prometheus text).
    if (!mediaType?.includes("json")) return;
    const pointer = `openapi#/paths/${escapePointer(match.template)}/${method.toLowerCase()}/responses/${status}/content/${escapePointer(mediaType)}/schema`;
    let validate = compiled.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: pointer });
      compiled.set(pointer, validate);
    }
    const body = res.body ? JSON.parse(res.body) : null;
    assert.ok(
      validate(body),
      `${method} ${match.template} ${status} breaks its schema: ${ajv.errorsText(validate.errors)}`,
    );
    // A problem's code must be one the route documents for that status (an example per code).
    const media = documented.content?.[mediaType] as { examples?: Record<string, unknown> } | undefined;
    const examples = media?.examples;
    if (mediaType === "application/problem+json" && examples) {
      assert.ok(
        Object.hasOwn(examples, body.code),
        `${method} ${match.template} answered ${status} ${body.code}, which the OpenAPI does not list for it`,
      );
    }
  };
}

function escapePointer(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}
