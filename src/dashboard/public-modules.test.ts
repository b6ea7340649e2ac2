/**
 * The dashboard's pure modules (amounts and error wording), imported by node as the browser
 * imports them: plain ES modules under public/, with no types, so loaded by URL and typed here.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

interface Money {
  parseAmount(text: string, decimals?: number): { wei?: string | null; error?: string };
  parseUnits(text: string, decimals?: number): string | null;
  formatUnits(wei: string | bigint, decimals?: number): string;
}
interface Messages {
  plainDetail(detail: string): string;
}

const money = (await import(new URL("./public/money.js", import.meta.url).href)) as Money;
const messages = (await import(new URL("./public/messages.js", import.meta.url).href)) as Messages;

describe("parseAmount: what a person types, in exact wei", () => {
  test("a plain decimal and a lone decimal comma give the same wei; nothing is multiplied", () => {
    const cases: [string, string][] = [
      ["1.5", "1500000000000000000"],
      ["1,5", "1500000000000000000"],
      ["0,05", "50000000000000000"],
      ["0,050", "50000000000000000"],
      [" 2 ", "2000000000000000000"],
      ["0.000000000000000001", "1"],
      ["123456789012345678901234567890", "123456789012345678901234567890000000000000000000"],
    ];
    for (const [typed, wei] of cases) assert.deepEqual(money.parseAmount(typed), { wei }, typed);
  });

  test("anything where a separator could group thousands, or with spaces inside, is refused", () => {
    for (const typed of [
      "1,000",
      "12,345",
      "1,000.5",
      "1.000,5",
      "1,000,000",
      "1 000",
      "1.2.3",
      ",5",
      "5,",
      "-1",
      "1e3",
      "abc",
      "",
    ]) {
      const parsed = money.parseAmount(typed);
      assert.equal(parsed.wei, undefined, typed);
      assert.match(parsed.error ?? "", /plain number such as 1\.5/, typed);
    }
  });

  test("more decimals than the currency has is refused, not rounded", () => {
    assert.match(money.parseAmount("0.0000000000000000001").error ?? "", /more than 18 decimals/);
    assert.deepEqual(money.parseAmount("1,25", 2), { wei: "125" });
    assert.match(money.parseAmount("1,255", 2).error ?? "", /plain number/);
  });

  test("parseUnits no longer strips commas: a comma is not a number", () => {
    assert.equal(money.parseUnits("1,5"), null);
    assert.equal(money.parseUnits("1,000"), null);
    assert.equal(money.parseUnits("1.5"), "1500000000000000000");
  });

  test("an amount formatted by the page and typed back parses to the same wei", () => {
    for (const wei of ["1", "1500000000000000000", "50000000000000000", "999999999999999999999"]) {
      const shown = money.formatUnits(wei).replaceAll(",", "");
      assert.deepEqual(money.parseAmount(shown), { wei });
    }
  });
});

describe("plainDetail: the API's schema refusals in the form's words", () => {
  test("a pattern becomes a sentence about the field; no regex, no body path", () => {
    const cases: [string, string][] = [
      [
        'body.targetContract must match pattern "^0x[0-9a-fA-F]{40}$"',
        "Contract address must be 0x followed by 40 hexadecimal characters.",
      ],
      [
        'body/target must match pattern "^0x[0-9a-fA-F]{40}$"',
        "Contract address must be 0x followed by 40 hexadecimal characters.",
      ],
      [
        'body.senders[1] must match pattern "^0x[0-9a-fA-F]{40}$"',
        "Sender 2 must be 0x followed by 40 hexadecimal characters.",
      ],
      [
        'body.functionSelector must match pattern "^0x[0-9a-fA-F]{8}$"',
        "Function selector must be 0x followed by 8 hexadecimal characters.",
      ],
      ['body.slug must match pattern "^[a-z0-9-]{3,48}$"', "Slug is not in the accepted format."],
      ['querystring.from must match format "date-time"', "From must be a date and time."],
      ["body.email is required", "Email is required."],
      ["body.rateLimit must be >= 1", "Rate limit must be at least 1."],
      ["body.name must NOT have more than 128 characters", "Name must have at most 128 characters."],
      ["body has an unknown field 'x'", "The request carried a field the service does not accept."],
    ];
    for (const [detail, plain] of cases) {
      const said = messages.plainDetail(detail);
      assert.equal(said, plain, detail);
      assert.doesNotMatch(said, /\^|\$|\{\d|body[./]|querystring/);
    }
  });

  test("the API's own sentences are left as they are", () => {
    for (const detail of [
      "the slug 'acme' is taken",
      "`from` must be before `to`",
      "request body is too large",
      "an organization keeps an owner",
    ]) {
      assert.equal(messages.plainDetail(detail), detail);
    }
  });
});
