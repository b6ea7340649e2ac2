import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { batchPerKey } from "./batching.ts";

/** A call that answers when told to, and remembers what it was given. */
function controlledRun() {
  const calls: { items: number[]; answer: () => void; fail: (err: Error) => void }[] = [];
  let called: () => void = () => {};
  const run = (_key: string, items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      calls.push({ items, answer: () => resolve(items.map((i) => i * 10)), fail: reject });
      called();
    });
  const nextCall = () => new Promise<void>((resolve) => (called = resolve));
  return { calls, run, nextCall };
}

describe("batchPerKey", () => {
  it("groups what arrives while a call is in flight, and answers each item its own result", async () => {
    const { calls, run, nextCall } = controlledRun();
    const send = batchPerKey(run);
    let second = nextCall();
    const first = send("k", 1);
    await second;
    const rest = [send("k", 2), send("k", 3), send("k", 4)];
    second = nextCall();
    calls[0]!.answer();
    assert.equal(await first, 10);
    await second;
    assert.deepEqual(
      calls.map((c) => c.items),
      [[1], [2, 3, 4]],
    );
    calls[1]!.answer();
    assert.deepEqual(await Promise.all(rest), [20, 30, 40]);
  });

  it("sends the next call before the finished call's callers resume", async () => {
    // A reservation's caller signs its response when it resumes (about 100 us each): a next call
    // scheduled after them left the database idle between batches for as long as that took.
    const { calls, run, nextCall } = controlledRun();
    const send = batchPerKey(run);
    const events: string[] = [];
    let called = nextCall();
    const first = send("k", 1).then(() => events.push("first caller resumed"));
    await called;
    const later = send("k", 2);
    called = nextCall().then(() => {
      events.push("second call sent");
    });
    calls[0]!.answer();
    await Promise.all([first, called]);
    assert.deepEqual(events, ["second call sent", "first caller resumed"]);
    calls[1]!.answer();
    assert.equal(await later, 20);
  });

  it("rejects every item of a failed call, and the items behind it still get their call", async () => {
    const { calls, run, nextCall } = controlledRun();
    const send = batchPerKey(run);
    let called = nextCall();
    const first = [send("k", 1), send("k", 2)];
    await called;
    const behind = send("k", 3);
    called = nextCall();
    calls[0]!.fail(new Error("database went away"));
    for (const p of first) await assert.rejects(p, /database went away/);
    await called;
    calls[1]!.answer();
    assert.equal(await behind, 30);
  });

  it("keeps one call in flight per key, and keys apart", async () => {
    const { calls, run, nextCall } = controlledRun();
    const send = batchPerKey(run);
    let called = nextCall();
    const a = send("a", 1);
    await called;
    called = nextCall();
    const b = send("b", 2);
    await called;
    const a2 = send("a", 3);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(calls.length, 2, "a's second item waits for a's call, b's call does not");
    called = nextCall();
    calls[0]!.answer();
    await called;
    for (const c of calls.slice(1)) c.answer();
    assert.deepEqual(await Promise.all([a, b, a2]), [10, 20, 30]);
  });
});
