/**
 * The OpenAPI document as a client generator and a client author use it: every operation named
 * and summarised, who may call it, and per route every error code it can answer, each with an
 * example; every code from the one catalogue. Redocly's lint runs in `npm run lint`; this checks
 * what a lint cannot know.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ERRORS, isErrorCode } from "../src/http/catalogue.ts";
import { ROUTE_DOCS } from "../src/http/openapi.ts";
import { startTestApp, type TestApp } from "./support/app.ts";

interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { examples?: Record<string, { value: unknown }> }> }>;
}

let t: TestApp;
let doc: { servers?: unknown[]; paths: Record<string, Record<string, Operation>> };
let operations: { method: string; path: string; op: Operation }[];

before(async () => {
  t = await startTestApp();
  doc = t.app.swagger() as unknown as typeof doc;
  operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
});
after(() => t.close());

describe("the OpenAPI document", () => {
  it("names and summarises every operation, with unique operationIds", () => {
    const ids = operations.map(({ op }) => op.operationId);
    for (const { method, path, op } of operations) {
      assert.match(op.operationId ?? "", /^[a-z][A-Za-z]+$/, `${method} ${path} has no operationId`);
      assert.ok(op.summary && op.summary.length > 5, `${method} ${path} has no summary`);
      assert.ok(op.tags?.length, `${method} ${path} has no tag`);
    }
    assert.equal(new Set(ids).size, ids.length, "operationIds repeat");
  });

  it("has an entry in ROUTE_DOCS for every route and no entry for a route that is gone", () => {
    const routes = new Set(
      operations.map(({ method, path }) => `${method} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
    );
    assert.deepEqual(new Set(Object.keys(ROUTE_DOCS)), routes);
  });

  it("declares security: [] on public routes, bearer elsewhere, and a servers entry", () => {
    assert.ok(doc.servers?.length, "no servers entry");
    for (const { method, path, op } of operations) {
      const key = `${method} ${path.replace(/\{(\w+)\}/g, ":$1")}`;
      const access = ROUTE_DOCS[key]!.access;
      if (access === "public") assert.deepEqual(op.security, [], `${key} is public`);
      else assert.ok(op.security?.length, `${key} needs credentials`);
    }
  });

  it("lists per route and status the codes it can answer, each from the catalogue with an example", () => {
    for (const { method, path, op } of operations) {
      for (const [status, response] of Object.entries(op.responses)) {
        const problem = response.content?.["application/problem+json"];
        if (!problem) continue;
        const examples = Object.entries(problem.examples ?? {});
        assert.ok(examples.length > 0, `${method} ${path} ${status} has no example`);
        for (const [code, example] of examples) {
          assert.ok(isErrorCode(code), `${method} ${path} lists ${code}, which is not in the catalogue`);
          assert.equal(String(ERRORS[code].status), status, `${code} listed under ${status}`);
          assert.equal((example.value as { code: string }).code, code);
        }
      }
      // Every route can fail on the service's side; every credentialed route can refuse them.
      assert.ok(op.responses["500"], `${method} ${path} documents no 500`);
      if (op.security?.length)
        assert.ok(op.responses["401"] || path === "/rpc", `${method} ${path} has no 401`);
    }
  });

  it("has no map schema without an example (a viewer would show additionalProp1)", () => {
    const bare: string[] = [];
    const walk = (node: unknown, at: string) => {
      if (Array.isArray(node)) {
        for (const [i, n] of node.entries()) walk(n, `${at}/${i}`);
      } else if (node && typeof node === "object") {
        const o = node as Record<string, unknown>;
        if (typeof o.additionalProperties === "object" && !o.examples && !o.example) bare.push(at);
        for (const [k, v] of Object.entries(o)) walk(v, `${at}/${k}`);
      }
    };
    walk(doc, "#");
    assert.deepEqual(bare, []);
  });
});

describe("the error catalogue", () => {
  it("has snake_case codes, a title, an explanation and an HTTP status for each", () => {
    for (const [code, spec] of Object.entries(ERRORS)) {
      assert.match(code, /^[a-z]+(_[a-z0-9]+)*$/);
      assert.ok(spec.title.length > 0 && spec.when.length > 10, code);
      assert.ok(spec.status >= 400 && spec.status < 600, code);
      assert.ok(Number.isInteger(spec.rpc) && spec.rpc < 0, code);
    }
  });
});
