import fastJsonStringifyCompiler from "@fastify/fast-json-stringify-compiler";
import AjvModule, { type ValidateFunction } from "ajv";
import formatsModule from "ajv-formats";
import type { FastifySchemaCompiler } from "fastify";

/**
 * Two validators: bodies are checked strictly (a string is never silently turned into a
 * number, unknown fields are refused where the schema says so), while path and query values,
 * which are always text on the wire, are coerced to the declared types.
 */
// ajv and ajv-formats are CommonJS; under NodeNext their default export is the module object.
const Ajv = AjvModule.default;
const addFormats = formatsModule.default;

export function validatorCompiler(): FastifySchemaCompiler<unknown> {
  return ({ schema, httpPart }) => {
    const part = httpPart === "body" ? "body" : "text";
    return compiledOnce(`${part}\0${JSON.stringify(schema)}`, () =>
      part === "body"
        ? (ajvs().strict.compile(schema as object) as ValidateFunction)
        : strictText(schema as TextSchema, ajvs().coercing.compile(schema as object) as ValidateFunction),
    );
  };
}

/**
 * Response serializers (fast-json-stringify, Fastify's own) compiled once per process per schema,
 * like the validators above. `external` are the schemas added with addSchema, which `$ref`s may name.
 */
export function serializerFactory(external: unknown, options: unknown) {
  const compile = fastJsonStringifyCompiler()(external, options as never);
  const prefix = `serializer\0${JSON.stringify(external)}\0${JSON.stringify(options)}\0`;
  return (route: { schema?: unknown; method: string; url: string; httpStatus: string }) =>
    compiledOnce(`${prefix}${JSON.stringify(route.schema)}`, () => compile(route));
}

/**
 * What compiling a schema gave, by the schema's text. Tests build hundreds of apps in a few
 * processes, and each app compiled every route's schemas anew (about 0.55 s of CPU per app, most
 * of building one); the same text compiles to the same function, so it is compiled once. In
 * production there is one app per process and this changes nothing.
 */
function compiledOnce<T>(key: string, compile: () => T): T {
  let done = COMPILED.get(key) as T | undefined;
  if (done === undefined) {
    done = compile();
    COMPILED.set(key, done);
  }
  return done;
}
const COMPILED = new Map<string, unknown>();

let shared: { strict: InstanceType<typeof Ajv>; coercing: InstanceType<typeof Ajv> } | null = null;
function ajvs() {
  if (shared) return shared;
  const strict = new Ajv({
    allErrors: false,
    coerceTypes: false,
    removeAdditional: false,
    useDefaults: true,
  });
  const coercing = new Ajv({
    allErrors: false,
    coerceTypes: true,
    removeAdditional: false,
    useDefaults: true,
  });
  for (const ajv of [strict, coercing]) {
    addFormats(ajv);
    ajv.addKeyword("example");
  }
  shared = { strict, coercing };
  return shared;
}

interface TextSchema {
  properties?: Record<string, { type?: string }>;
}

// What a path or query value must look like before Ajv may coerce it: Ajv would turn " " or ""
// into 0 and "1e3" into 1000, which a client never meant.
const TEXT_SHAPES: Record<string, RegExp> = {
  integer: /^-?(0|[1-9][0-9]{0,15})$/,
  number: /^-?(0|[1-9][0-9]{0,15})(\.[0-9]+)?$/,
  boolean: /^(true|false)$/,
};

function strictText(schema: TextSchema, validate: ValidateFunction): ValidateFunction {
  const properties = schema.properties ?? {};
  const checked = ((data: unknown) => {
    if (data && typeof data === "object") {
      for (const [name, value] of Object.entries(data as Record<string, unknown>)) {
        const type = properties[name]?.type;
        const shape = type ? TEXT_SHAPES[type] : undefined;
        if (shape && typeof value === "string" && !shape.test(value)) {
          checked.errors = [
            {
              instancePath: `/${name}`,
              schemaPath: "#/type",
              keyword: "type",
              params: { type },
              message: `must be ${type}`,
            },
          ];
          return false;
        }
      }
    }
    const ok = validate(data);
    checked.errors = validate.errors;
    return ok;
  }) as ValidateFunction;
  return checked;
}

/** Where a NUL was found: the keys and indexes leading to it, in order. */
export type NulPath = (string | number)[];

interface Step {
  value: unknown;
  key: string | number | null;
  parent: Step | null;
}

/**
 * The path to the first string (or object key) holding U+0000 in a parsed JSON value, path
 * parameters or a query, or null. PostgreSQL cannot store NUL in text, so such a value would fail
 * deep in a query as a 500 (and the driver's error would carry the statement's parameters into
 * the logs); it is refused at the edge instead. The walk is iterative and keeps parent links
 * rather than paths: a 64 KiB body can nest arrays 30,000 deep, which neither a recursive walk
 * nor one copying paths at every level would survive.
 */
export function findNul(value: unknown): NulPath | null {
  const stack: Step[] = [{ value, key: null, parent: null }];
  while (stack.length > 0) {
    const step = stack.pop()!;
    const v = step.value;
    if (typeof v === "string") {
      if (v.includes("\u0000")) return pathOf(step);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: step });
    } else if (v !== null && typeof v === "object") {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        if (key.includes("\u0000")) return pathOf({ value: child, key, parent: step });
        stack.push({ value: child, key, parent: step });
      }
    }
  }
  return null;
}

function pathOf(step: Step): NulPath {
  const path: NulPath = [];
  for (let s: Step | null = step; s !== null && s.key !== null; s = s.parent) path.push(s.key);
  return path.reverse();
}
