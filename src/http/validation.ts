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
  return ({ schema, httpPart }) => {
    const ajv = httpPart === "body" ? strict : coercing;
    return ajv.compile(schema as object) as ValidateFunction;
  };
}
