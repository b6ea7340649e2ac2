import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import { infoWithBindings, lazyChildLogger } from "./request-logger.ts";

/** A pino logger writing into `lines`, and a count of the children made of it. */
function capture(level = "info") {
  const lines: Record<string, unknown>[] = [];
  const root = pino(
    { level, base: null, timestamp: false },
    { write: (s: string) => lines.push(JSON.parse(s)) },
  );
  let children = 0;
  const parent = Object.assign(Object.create(root), {
    child: (...args: Parameters<typeof root.child>) => {
      children++;
      return root.child(...args);
    },
  }) as typeof root;
  return { lines, parent, children: () => children };
}

describe("the lazy request logger", () => {
  it("writes the completion line with every binding and makes no child", () => {
    const c = capture();
    const log = lazyChildLogger(c.parent, { reqId: "r-1" }, {}).child({ projectId: "p", apiKeyId: 7 });
    infoWithBindings(log, { route: "/x", code: "not_allowlisted" }, { responseTime: 3 }, "request completed");
    assert.equal(c.children(), 0);
    assert.deepEqual(c.lines, [
      {
        level: 30,
        reqId: "r-1",
        projectId: "p",
        apiKeyId: 7,
        route: "/x",
        code: "not_allowlisted",
        responseTime: 3,
        msg: "request completed",
      },
    ]);
  });

  it("a line logged through it is a child's line, with the bindings gathered so far", () => {
    const c = capture();
    const log = lazyChildLogger(c.parent, { reqId: "r-2" }, {}).child({ developerId: 4 });
    log.warn({ detail: "x" }, "handler line");
    infoWithBindings(log, { route: "/y" }, { responseTime: 1 }, "request completed");
    assert.equal(c.children(), 1);
    assert.deepEqual(
      c.lines.map((l) => [l.msg, l.reqId, l.developerId, l.route ?? null]),
      [
        ["handler line", "r-2", 4, null],
        ["request completed", "r-2", 4, "/y"],
      ],
    );
  });

  it("reports its parent's level until it has one of its own, and honours a per-route level", () => {
    const c = capture("warn");
    const log = lazyChildLogger(c.parent, { reqId: "r-3" }, {});
    assert.equal(log.level, "warn");
    log.info("not written");
    infoWithBindings(log, {}, {}, "not written either");
    const debugRoute = lazyChildLogger(c.parent, { reqId: "r-4" }, { level: "debug" });
    assert.equal(debugRoute.level, "debug");
    debugRoute.debug("written");
    assert.deepEqual(
      c.lines.map((l) => l.msg),
      ["written"],
    );
  });
});
