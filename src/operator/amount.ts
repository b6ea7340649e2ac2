/**
 * Amounts on the operator's command line: a wei integer ("1500000000000000000") or a decimal with
 * a unit ("0.5ether", "2 gwei", "100wei"). Parsed digit by digit into a bigint of wei, never
 * through a float, so "0.1ether" is exactly 10^17 wei.
 */

const UNIT_DECIMALS = { wei: 0, gwei: 9, ether: 18 } as const;
type Unit = keyof typeof UNIT_DECIMALS;

/** uint256: nothing on chain holds more. */
const MAX_WEI = 2n ** 256n - 1n;

/**
 * The amount in wei, or why the text is not one. The reason quotes nothing of the text (it may be
 * a secret pasted in the wrong place): the caller says what the text looked like.
 */
export function parseWei(text: string): { ok: true; wei: bigint } | { ok: false; reason: string } {
  const match = /^(\d+)(?:\.(\d+))?\s*(wei|gwei|ether)?$/i.exec(text.trim());
  if (!match) {
    return {
      ok: false,
      reason: `is not an amount in wei ("1000") or with a unit ("0.5ether", "2gwei")`,
    };
  }
  const [, whole, fraction = "", unitText] = match;
  const unit = (unitText?.toLowerCase() ?? "wei") as Unit;
  const decimals = UNIT_DECIMALS[unit];
  if (fraction.length > decimals) {
    return { ok: false, reason: `has more decimals than ${unit} allows (${decimals})` };
  }
  const wei = BigInt(whole!) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0");
  if (wei > MAX_WEI) return { ok: false, reason: "does not fit in a uint256" };
  return { ok: true, wei };
}
