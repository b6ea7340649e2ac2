/**
 * The registry of webhook event types (src/webhooks/events.ts) against everything that repeats
 * it: the SQL that emits the events (types and payload keys), the README's table, the route the
 * dashboard reads, and events written by the real triggers, one of every type.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import type { Hex } from "viem";
import { billOperation, creditDeposit, release, reverseBilling } from "../src/ledger/ledger.ts";
import type { ChainOperation } from "../src/settlement/scan.ts";
import { recordOperation } from "../src/settlement/store.ts";
import { EVENT_TYPES, EVENTS, type EventType } from "../src/webhooks/events.ts";
import { relaySponsoredEvents } from "../src/webhooks/relay.ts";
import {
  authorizeMint,
  fundedProject,
  MINT_SELECTOR,
  MINT_TARGET,
  startTestApp,
  TEST_PAYMASTER,
  type TestApp,
} from "./support/app.ts";
import { assertEventsMatchRegistry } from "./support/events.ts";
import { addWebhookEndpoint } from "./support/receiver.ts";

const FUNCTIONS = new URL("../src/db/functions/", import.meta.url);
const sqlOf = (file: string) =>
  readFileSync(new URL(file, FUNCTIONS), "utf8")
    .split("\n")
    .filter((line) => !/^\s*--/.test(line))
    .join("\n");
const emitters = readdirSync(FUNCTIONS)
  .filter((f) => f.endsWith(".sql"))
  .map((file) => ({ file, sql: sqlOf(file) }))
  .filter(({ sql }) => /emit_events?\(/.test(sql));
/** The event types a piece of SQL names (dotted literals such as 'sponsorship.settled'). */
const typesIn = (sql: string) => [...sql.matchAll(/'([a-z_]+\.[a-z_]+)'/g)].map((m) => m[1]!);
/** The keys of the JSON objects a piece of SQL builds (the literal before each value). */
const keysIn = (sql: string) =>
  [...sql.matchAll(/jsonb_build_object\(([\s\S]*?)\)\)?;/g)].flatMap((m) =>
    [...m[1]!.matchAll(/(?:^|[(,])\s*'([a-zA-Z]+)'\s*,/g)].map((k) => k[1]!),
  );
const keysOf = (type: EventType) => Object.keys(EVENTS[type].payload.properties).sort();

describe("the webhook event registry and the SQL that emits events", () => {
  it("every registered type is emitted by the database, and the database emits no other", () => {
    const emitted = new Set(emitters.flatMap(({ sql }) => typesIn(sql)));
    const store = readFileSync(new URL("../src/webhooks/store.ts", import.meta.url), "utf8");
    for (const t of typesIn(store.slice(store.indexOf("emit_event(")))) emitted.add(t);
    assert.deepEqual([...emitted].sort(), [...EVENT_TYPES].sort());
  });

  it("each emitting function builds exactly the keys of the payload types it emits", () => {
    for (const { file, sql } of emitters) {
      const types = [...new Set(typesIn(sql))] as EventType[];
      const expected = [...new Set(types.flatMap(keysOf))].sort();
      // Nested objects (a call's target and selector) are keys of the nested type, not the payload's.
      const nested = new Set(["target", "selector"].filter((k) => expected.includes(k)));
      const built = [...new Set(keysIn(sql))].filter((k) => expected.includes(k) || !nested.has(k)).sort();
      assert.deepEqual(built, expected, `${file} emits ${types.join(", ")}`);
    }
  });

  it("the README's table lists every type, with its description and its payload's keys", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const table = readme.slice(readme.indexOf("### Event types"), readme.indexOf("### Approval webhook"));
    const rows = [...table.matchAll(/^\| `([a-z_.]+)` \| (.+?) \| `([^`]+)`/gm)].map((m) => ({
      type: m[1]!,
      description: m[2]!,
      keys: m[3]!
        .replace(/\[[^\]]*\]|\([^)]*\)/g, "")
        .split(/,\s*/)
        .map((k) => k.replace(/[ ([].*$/, ""))
        .sort(),
    }));
    assert.deepEqual(
      rows.map((r) => r.type),
      EVENT_TYPES,
    );
    for (const row of rows) {
      const type = row.type as EventType;
      assert.equal(row.description, EVENTS[type].description, type);
      assert.deepEqual(row.keys, keysOf(type), type);
    }
  });
});

describe("events written by the real triggers", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(async () => {
    await t.close();
  });

  it("GET /webhooks/event-types lists every type with its payload's JSON Schema, without credentials", async () => {
    const res = await t.request({ method: "GET", url: "/webhooks/event-types" });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { type: string; description: string; payload: { properties: object } }[];
    assert.deepEqual(
      body.map((e) => e.type),
      EVENT_TYPES,
    );
    for (const e of body) {
      assert.deepEqual(Object.keys(e.payload.properties).sort(), keysOf(e.type as EventType));
    }
  });

  it("one event of every type, each matching its payload type key for key", async () => {
    const p = await fundedProject(t, { target: MINT_TARGET, selector: MINT_SELECTOR }, 10n ** 16n);
    await addWebhookEndpoint(t, p, "http://127.0.0.1:9/hook");
    const cap = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/policies/five-a-day`,
      token: p.ownerToken,
      payload: { kind: "project_count_cap", maxOperations: 5, window: "day" },
    });
    assert.equal(cap.statusCode, 201, cap.body);
    const alert = await t.request({
      method: "PUT",
      url: `/projects/${p.projectId}/balance-alert`,
      token: p.ownerToken,
      payload: { thresholdWei: (10n ** 16n + 1n).toString() },
    });
    assert.equal(alert.statusCode, 200, alert.body);
    await creditDeposit(t.db, {
      projectId: p.projectId,
      reference: `14601:0x${"12".repeat(32)}:0`,
      amountWei: 1n,
    });

    const grants: { authorizationId: string; maxGasCost: string }[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await authorizeMint(t, p);
      assert.equal(res.statusCode, 200, res.body);
      grants.push(res.json());
    }
    const [settled, expired, reversed, unattributed] = grants as [
      (typeof grants)[0],
      (typeof grants)[0],
      (typeof grants)[0],
      (typeof grants)[0],
    ];
    assert.equal(await release(t.db, expired.authorizationId), true);
    const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}` as Hex;
    const paid = (authId: string, n: number): ChainOperation => ({
      blockHash: hex(32),
      logIndex: n,
      blockNumber: BigInt(100 + n),
      txHash: hex(32),
      userOpHash: hex(32),
      sender: `0x${"ee".repeat(20)}`,
      authId: authId as Hex,
      success: true,
      prefundTooLow: false,
      actualGasUsed: 60_000n,
      actualGasCostWei: 1_000_000n,
    });
    await t.db.transaction(async (tx) => {
      await recordOperation(tx, 14601, TEST_PAYMASTER, paid(settled.authorizationId, 0));
      const billing = await billOperation(tx, {
        authId: reversed.authorizationId,
        chainId: 14601,
        paymaster: TEST_PAYMASTER,
        outcome: "reverted",
        actualGasUsed: 70_000n,
        actualGasCostWei: 2_000_000n,
        txHash: `0x${"ab".repeat(32)}`,
        userOpHash: `0x${"cd".repeat(32)}`,
      });
      assert.equal(billing.kind, "charged");
      await reverseBilling(tx, {
        authId: reversed.authorizationId,
        projectId: p.projectId,
        chainId: 14601,
        billedWei: 2_000_000n,
        reference: `reorg:${reversed.authorizationId}`,
      });
      // The same authorization paid twice: the second is not billed, and is reported.
      await recordOperation(tx, 14601, TEST_PAYMASTER, paid(unattributed.authorizationId, 1));
      await recordOperation(tx, 14601, TEST_PAYMASTER, paid(unattributed.authorizationId, 2));
    });
    // Releases and reversals give their operations back to the cap's window: authorize until it
    // refuses (five in the window at most).
    let last = await authorizeMint(t, p);
    for (let i = 0; i < 5 && last.statusCode === 200; i++) last = await authorizeMint(t, p);
    assert.equal(last.json().code, "project_cap_exceeded", last.body);

    // sponsorship.sponsored is written by the relay once the reservations have committed
    // (migration 055); the webhook worker runs it, and no worker runs here.
    await relaySponsoredEvents(t.db);
    const seen = await assertEventsMatchRegistry(t.db);
    assert.deepEqual([...seen].sort(), [...EVENT_TYPES].sort(), "one of every type was written");
  });
});
