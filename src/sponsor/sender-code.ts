/**
 * The sender's code, decided once for both ways in (call authorizations and whole operations):
 * which code hash the authorization binds, or why the service refuses to sponsor the sender.
 *
 * accounts/code resolves what the sender will run and matches it against the registry of known
 * implementations; this module applies the project's choice for what the registry does not
 * know (`unknown_accounts`): `refuse` (the default) answers `account_not_supported`;
 * `caps_only` signs with no code bound, so only the authorization's cost ceilings bound what the
 * account does with the sponsor's gas. A known account is bound even on a `caps_only` project.
 */
import type { Hex } from "viem";
import type { AccountEncoding } from "../accounts/calls.ts";
import type {
  KnownImplementation,
  SenderCode,
  SenderCodeQuery,
  SenderCodeResolver,
} from "../accounts/code/resolve.ts";
import type { ErrorCode } from "../http/catalogue.ts";
import { ZERO_HASH } from "../paymaster/layout.ts";

/** A project's choice for accounts whose code the service does not know. */
export type UnknownAccounts = "refuse" | "caps_only";
export const UNKNOWN_ACCOUNTS_VALUES: readonly UnknownAccounts[] = ["refuse", "caps_only"];

export type SenderCodeVerdict =
  | {
      kind: "sponsorable";
      /** What the paymaster checks EXTCODEHASH(sender) against; ZERO_HASH binds nothing. */
      codeHash: Hex;
      /** Null when an unknown account is sponsored on caps alone. */
      implementation: KnownImplementation | null;
    }
  | { kind: "refused"; code: ErrorCode; detail: string };

/** What the caller's calls need from the implementation. */
export type CodeNeed =
  /** Mode 0: the paymaster reads the call out of `execute(address,uint256,bytes)`. */
  | { kind: "single_execute" }
  /** Mode 1: the encoding the callData was decoded with. */
  | { kind: "encoding"; encoding: AccountEncoding };

/**
 * The verdict for a query: synchronously from the resolver's cache when it holds a fresh answer
 * (every request after a sender's first, within the staleness window), else after resolving.
 */
export function verifySenderCode(
  resolver: SenderCodeResolver,
  query: SenderCodeQuery,
  unknownAccounts: UnknownAccounts,
  need: CodeNeed,
): SenderCodeVerdict | Promise<SenderCodeVerdict> {
  const cached = resolver.peek?.(query);
  if (cached) return judge(cached, unknownAccounts, need);
  return resolver.resolve(query).then((code) => judge(code, unknownAccounts, need));
}

function judge(code: SenderCode, unknownAccounts: UnknownAccounts, need: CodeNeed): SenderCodeVerdict {
  if (code.kind === "known") {
    const { implementation } = code;
    if (need.kind === "single_execute" && !implementation.singleExecute) {
      return refused(
        `the sender runs ${implementation.name}, which has no execute(address,uint256,bytes): use ERC-7677 (POST /rpc) for it`,
      );
    }
    if (need.kind === "encoding" && !implementation.encodings.includes(need.encoding)) {
      return refused(
        `the sender runs ${implementation.name}, whose code has no entry point for ${need.encoding} calldata`,
      );
    }
    return { kind: "sponsorable", codeHash: code.codeHash, implementation };
  }
  if (unknownAccounts === "caps_only") {
    return { kind: "sponsorable", codeHash: ZERO_HASH, implementation: null };
  }
  if (code.kind === "unavailable") {
    return { kind: "refused", code: "chain_unavailable", detail: code.detail };
  }
  return refused(code.detail);
}

function refused(detail: string): SenderCodeVerdict {
  return { kind: "refused", code: "account_not_supported", detail };
}
