// Exact money formatting: wei strings from the API become decimal amounts with BigInt, never a
// float, and amounts typed by a person become wei strings the same way.

/** "1500000000000000000", 18 -> "1.5"; keeps every significant digit. */
export function formatUnits(wei, decimals = 18) {
  const value = BigInt(wei);
  const negative = value < 0n;
  const abs = negative ? -value : value;
  const base = 10n ** BigInt(decimals);
  const whole = abs / base;
  const fraction = (abs % base).toString().padStart(decimals, "0").replace(/0+$/, "");
  const grouped = whole.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${negative ? "-" : ""}${grouped}${fraction ? `.${fraction}` : ""}`;
}

/**
 * "1.5", 18 -> "1500000000000000000"; null unless the text is a plain non-negative decimal (digits,
 * at most one dot, no separators) with at most `decimals` decimals.
 */
export function parseUnits(text, decimals = 18) {
  const m = /^(\d{1,60})(?:\.(\d+))?$/.exec(String(text).trim());
  if (!m) return null;
  const fraction = m[2] ?? "";
  if (fraction.length > decimals) return null;
  return (BigInt(m[1]) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0")).toString();
}

const PLAIN = "type a plain number such as 1.5";

/**
 * An amount typed by a person -> `{ wei }` (a decimal string) or `{ error }` (a sentence for the
 * form). Never multiplied: a lone comma with no dot ("1,5", "0,05") is the decimal separator, as
 * many keyboards and locales write it; anything where a comma or dot could be a thousands
 * separator ("1,000", "1,000.5", "1.000,5", "1,000,000") or that has spaces inside is refused and
 * the person is asked for a plain number, rather than guessed at.
 */
export function parseAmount(text, decimals = 18) {
  const typed = String(text ?? "").trim();
  if (typed === "") return { error: `enter an amount: ${PLAIN}` };
  if (/\s/.test(typed)) return { error: `"${typed}" has spaces inside: ${PLAIN}` };
  const commas = typed.split(",").length - 1;
  const dots = typed.split(".").length - 1;
  if (commas > 1 || (commas === 1 && dots > 0)) {
    return { error: `"${typed}" has more than one separator (a thousands separator?): ${PLAIN}` };
  }
  let plain = typed;
  if (commas === 1) {
    const [whole, fraction] = typed.split(",");
    // "1,000" is a thousand in English and one in German; "0,050" can only be a fraction.
    if (fraction.length === 3 && !/^0*$/.test(whole)) {
      return { error: `"${typed}" could be a thousands separator or a decimal comma: ${PLAIN}` };
    }
    plain = `${whole}.${fraction}`;
  }
  const m = /^(\d{1,60})(?:\.(\d+))?$/.exec(plain);
  if (!m) return { error: `"${typed}" is not a number: ${PLAIN}` };
  if ((m[2] ?? "").length > decimals) return { error: `"${typed}" has more than ${decimals} decimals` };
  return { wei: parseUnits(plain, decimals) };
}

/** A short form for charts' axes: at most `digits` decimals, rounded toward zero (still BigInt). */
export function formatShort(wei, decimals = 18, digits = 6) {
  const value = BigInt(wei);
  const step = 10n ** BigInt(Math.max(0, decimals - digits));
  const truncated = (value / step) * step;
  const text = formatUnits(truncated, decimals);
  return truncated !== value ? `≈${text}` : text;
}
