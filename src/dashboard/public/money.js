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

/** "1.5", 18 -> "1500000000000000000"; null when the text is not a non-negative decimal that fits. */
export function parseUnits(text, decimals = 18) {
  const t = String(text).trim().replaceAll(",", "");
  const m = /^(\d{1,60})(?:\.(\d+))?$/.exec(t);
  if (!m) return null;
  const fraction = m[2] ?? "";
  if (fraction.length > decimals) return null;
  return (BigInt(m[1]) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0")).toString();
}

/** A short form for charts' axes: at most `digits` decimals, rounded toward zero (still BigInt). */
export function formatShort(wei, decimals = 18, digits = 6) {
  const value = BigInt(wei);
  const step = 10n ** BigInt(Math.max(0, decimals - digits));
  const truncated = (value / step) * step;
  const text = formatUnits(truncated, decimals);
  return truncated !== value ? `≈${text}` : text;
}
