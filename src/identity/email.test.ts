import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { isUnverifiedEmail, normalizeEmail, unverifiedEmailOf } from "./email.ts";

describe("normalizeEmail", () => {
  it("folds ASCII letters only: Kim@Example.com is kim@example.com", () => {
    assert.equal(normalizeEmail("Kim@Example.com"), "kim@example.com");
    assert.equal(normalizeEmail("kim@example.com"), "kim@example.com");
    assert.equal(normalizeEmail("O'Brien+games@Studio-9.IO"), "o'brien+games@studio-9.io");
  });

  it("never merges a Unicode look-alike into an ASCII address: Kelvin sign, dotless ı, İ, fullwidth letters", () => {
    for (const raw of [
      "\u212Aim@example.com", // KELVIN SIGN: toLowerCase() and even NFC make it K / k
      "k\u0131m@example.com", // LATIN SMALL LETTER DOTLESS I
      "K\u0130M@example.com", // LATIN CAPITAL LETTER I WITH DOT ABOVE: lowercases to i + U+0307
      "\uFF4Bim@example.com", // FULLWIDTH LATIN SMALL LETTER K: NFKC makes it k
      "kim@\uFF45xample.com", // FULLWIDTH e in the domain
      "\uFF2Bim@example.com", // FULLWIDTH LATIN CAPITAL LETTER K
      "ki\u0301m@example.com", // a combining accent
      "kim@exa\u00ADmple.com", // SOFT HYPHEN, invisible
      "jos\u00E9@example.com", // an internationalised address: refused, not folded
    ]) {
      assert.equal(normalizeEmail(raw), null, JSON.stringify(raw));
    }
  });

  it("refuses what is not an address, and the reserved .invalid domain", () => {
    for (const raw of [
      "",
      "kim",
      "kim@",
      "@example.com",
      "kim@@example.com",
      "k im@example.com",
      `${"a".repeat(65)}@example.com`,
      "kim@x.invalid",
      "kim@INVALID",
      unverifiedEmailOf("subject"),
    ]) {
      assert.equal(normalizeEmail(raw), null, JSON.stringify(raw));
    }
  });

  it("is injective up to ASCII case, idempotent, and yields what the developers.email CHECK accepts", () => {
    const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 40 }),
        fc.string({ unit: "binary", maxLength: 40 }),
        (a, b) => {
          const x = normalizeEmail(`${a}@example.com`);
          const y = normalizeEmail(`${b}@example.com`);
          if (x !== null) {
            assert.match(x, /^[!-~]+$/);
            assert.equal(x, x.toLowerCase());
            assert.equal(normalizeEmail(x), x);
          }
          if (x !== null && x === y) assert.equal(asciiLower(a), asciiLower(b));
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe("unverifiedEmailOf", () => {
  it("is unique per subject, recognisable, and no invitation can name it", () => {
    const a = unverifiedEmailOf("https://id.example user-1");
    const b = unverifiedEmailOf("https://id.example user-2");
    assert.notEqual(a, b);
    assert.ok(isUnverifiedEmail(a));
    assert.ok(!isUnverifiedEmail("kim@example.com"));
    assert.equal(normalizeEmail(a), null);
    assert.ok(a.length <= 254 && a === a.toLowerCase());
  });
});
