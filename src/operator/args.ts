/**
 * The operator CLI's command line, parsed into one command value with no I/O: which command, its
 * options, and the connection flags. Every value is checked against its flag's kind here, before
 * anything is read or sent, so that a mistake is a UsageError (exit status 2).
 *
 * No message ever quotes what was typed: not a value, not an unknown command or option. A private
 * key pasted after --signer, a mnemonic given as a command, an RPC URL with a password in the
 * wrong flag would otherwise land in a terminal, a CI log or a support ticket. A refused value is
 * described by its shape instead (shapeOf: "a 66-character hex value"), which is enough to see the
 * mistake.
 */
import { parseArgs } from "node:util";
import { type Address, getAddress, isAddress } from "viem";
import type { EntryPointVersion } from "../config.ts";
import { parseWei } from "./amount.ts";

/** The flags every chain command shares; all optional, defaults come from the service's settings. */
export interface ConnectionFlags {
  rpcUrl?: string;
  chainId?: number;
  paymaster?: string;
  entryPointVersion?: EntryPointVersion;
}

export class UsageError extends Error {}

/** What a flag's value must be; checked by parseCommandLine, converted by the command. */
export type FlagKind = "address" | "amount" | "integer" | "url" | "entry-point" | "xpub" | "file";

/** Every flag a command may take, with its kind: the one list usage, parsing and the tests read. */
export const FLAGS = {
  amount: "amount",
  count: "integer",
  "fee-per-gas": "amount",
  "from-index": "integer",
  "min-deposit": "amount",
  "min-stake": "amount",
  "min-unstake-delay": "integer",
  owner: "address",
  plan: "file",
  "previous-valid-for": "integer",
  "priority-fee-per-gas": "amount",
  signed: "file",
  signer: "address",
  to: "address",
  "unstake-delay": "integer",
  xpub: "xpub",
} as const satisfies Record<string, FlagKind>;

type FlagName = keyof typeof FLAGS;

/** The flags every command takes (sweep-sign only --paymaster): where it acts. */
export const CONNECTION_FLAGS = {
  "rpc-url": "url",
  /** The chain by id; `--chain-id` is the same flag under its first name. */
  chain: "integer",
  "chain-id": "integer",
  "entry-point": "entry-point",
  paymaster: "address",
} as const satisfies Record<string, FlagKind>;

export interface CommandSpec {
  flags: FlagName[];
  required: FlagName[];
  /** The one positional argument (an address), if the command takes it. */
  positional?: string;
  /** Needs --entry-point (deploy: which build to deploy). */
  needsEntryPoint?: boolean;
  /** Reads and writes no chain: connection flags make no sense. */
  offline?: boolean;
  usage: string;
}

export const COMMANDS = {
  deploy: {
    flags: ["signer", "owner"],
    required: ["signer"],
    needsEntryPoint: true,
    usage: "deploy --entry-point v0.7|v0.8 --signer <address> [--owner <address>]",
  },
  deposit: { flags: ["amount"], required: ["amount"], usage: "deposit --amount <wei | 0.5ether>" },
  stake: {
    flags: ["amount", "unstake-delay"],
    required: ["amount", "unstake-delay"],
    usage: "stake --amount <wei | 1ether> --unstake-delay <seconds>",
  },
  "unlock-stake": { flags: [], required: [], usage: "unlock-stake" },
  "withdraw-stake": { flags: ["to"], required: ["to"], usage: "withdraw-stake --to <address>" },
  withdraw: {
    flags: ["to", "amount"],
    required: ["to", "amount"],
    usage: "withdraw --to <address> --amount <wei | 0.5ether>",
  },
  "set-signer": { flags: [], required: [], positional: "address", usage: "set-signer <address>" },
  "rotate-signer": {
    flags: ["previous-valid-for"],
    required: ["previous-valid-for"],
    positional: "address",
    usage: "rotate-signer <address> --previous-valid-for <seconds>",
  },
  check: {
    flags: ["signer", "min-deposit", "min-stake", "min-unstake-delay"],
    required: [],
    usage:
      "check [--signer <address>] [--min-deposit <amount>] [--min-stake <amount>] [--min-unstake-delay <seconds>]",
  },
  "sweep-plan": {
    flags: ["xpub", "count", "from-index", "fee-per-gas", "priority-fee-per-gas"],
    required: ["xpub", "count"],
    usage:
      "sweep-plan --xpub <xpub> --count <n> [--from-index 0] [--fee-per-gas <wei | 2gwei>] [--priority-fee-per-gas <wei>]",
  },
  "sweep-sign": {
    flags: ["plan"],
    required: ["plan"],
    offline: true,
    usage: "sweep-sign --plan <file | -> --paymaster <address>   (offline; the key in SWEEP_XPRV)",
  },
  "sweep-send": { flags: ["signed"], required: ["signed"], usage: "sweep-send --signed <file | ->" },
} satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

export interface ParsedCommand {
  name: CommandName;
  connection: ConnectionFlags;
  /** The positional address of set-signer and rotate-signer. */
  address?: string;
  flags: Partial<Record<FlagName, string>>;
}

export type Parsed = { kind: "help"; text: string } | { kind: "command"; command: ParsedCommand };

const CONNECTION_USAGE =
  "connection: [--rpc-url <url>] [--chain <id>] [--entry-point v0.7|v0.8] [--paymaster <address>]\n" +
  "(defaults: CHAIN_<id>_RPC_URL, chain 14601, v0.7, CHAIN_<id>_PAYMASTER_ADDRESS or _PAYMASTER_V08_ADDRESS)";

export function usage(): string {
  const lines = Object.values(COMMANDS).map((s) => `  npm run paymaster -- ${s.usage}`);
  return [
    "usage:",
    ...lines,
    CONNECTION_USAGE,
    "Transactions are sent with the key in OPERATOR_PRIVATE_KEY (the paymaster's owner); keys are never flags.",
  ].join("\n");
}

/** Flags that would put a key on the command line, refused before anything else is read. */
const SECRET_FLAG = /^--?(private-?key|key|secret|mnemonic|seed|xprv)(=|$)/i;

export function parseCommandLine(argv: readonly string[]): Parsed {
  if (argv.some((a) => SECRET_FLAG.test(a))) {
    throw new UsageError(
      "keys are never taken on the command line: set OPERATOR_PRIVATE_KEY (or SWEEP_XPRV for sweep-sign)",
    );
  }
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    return { kind: "help", text: usage() };
  }
  if (!Object.hasOwn(COMMANDS, name))
    throw new UsageError(`unknown command: got ${shapeOf(name)}; see npm run paymaster -- help`);
  const commandName = name as CommandName;
  const spec: CommandSpec = COMMANDS[commandName];

  const kinds: Record<string, FlagKind> = { ...CONNECTION_FLAGS };
  for (const flag of spec.flags) kinds[flag] = FLAGS[flag];
  const options = Object.fromEntries(Object.keys(kinds).map((f) => [f, { type: "string" as const }]));
  let parsed: { values: Record<string, string | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...rest], options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(explainParseError((err as Error).message, commandName, spec.usage));
  }
  const values = parsed.values as Record<string, string>;
  for (const [flag, value] of Object.entries(values)) checkValue(`--${flag}`, kinds[flag]!, value);
  for (const flag of spec.required) {
    if (values[flag] === undefined) throw new UsageError(`${commandName} needs --${flag}: ${spec.usage}`);
  }
  if (spec.needsEntryPoint && values["entry-point"] === undefined) {
    throw new UsageError(`${commandName} needs --entry-point: ${spec.usage}`);
  }
  if (spec.offline) {
    for (const f of ["rpc-url", "chain", "chain-id", "entry-point"])
      if (values[f] !== undefined)
        throw new UsageError(`${commandName} works offline: --${f} does not apply`);
    if (values.paymaster === undefined)
      throw new UsageError(`${commandName} needs --paymaster: ${spec.usage}`);
  }
  const positionals = parsed.positionals;
  if (positionals.length !== (spec.positional ? 1 : 0)) {
    throw new UsageError(`usage: npm run paymaster -- ${spec.usage}`);
  }
  if (spec.positional) addressFlag(`the ${spec.positional} argument`, positionals[0]!);
  const chainIds = (["chain", "chain-id"] as const)
    .filter((f) => values[f] !== undefined)
    .map((f) => integerFlag(`--${f}`, values[f]!, 1));
  if (chainIds.length === 2 && chainIds[0] !== chainIds[1])
    throw new UsageError("--chain and --chain-id name the same setting: give one of them");

  const flags: ParsedCommand["flags"] = {};
  for (const f of spec.flags) if (values[f] !== undefined) flags[f] = values[f];
  return {
    kind: "command",
    command: {
      name: commandName,
      connection: {
        rpcUrl: values["rpc-url"],
        chainId: chainIds[0],
        paymaster: values.paymaster,
        entryPointVersion:
          values["entry-point"] === undefined ? undefined : entryPointFlag(values["entry-point"]),
      },
      address: positionals[0],
      flags,
    },
  };
}

/**
 * node's parseArgs messages, reworded for this CLI. An option's name is repeated only when it is
 * one of this CLI's own (parseArgs quotes whatever was typed, which may be a pasted secret).
 */
function explainParseError(message: string, command: string, usageLine: string): string {
  const named = (option: string | undefined) => {
    const name = option?.replace(/^--/, "");
    return name !== undefined && (Object.hasOwn(FLAGS, name) || Object.hasOwn(CONNECTION_FLAGS, name))
      ? `--${name}`
      : null;
  };
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) {
    const name = named(unknown[1]);
    if (name) return `${name} is not an option of ${command}: ${usageLine}`;
    return `${command} takes no such option (got ${shapeOf(unknown[1]!)}): ${usageLine}`;
  }
  const noValue = /Option '(--[\w-]+)[^']*' argument (missing|is ambiguous)/.exec(message);
  const name = named(noValue?.[1]);
  if (noValue && name) return `${name} needs a value: ${usageLine}`;
  return `the command line of ${command} is not one it takes: ${usageLine}`;
}

/**
 * What a refused value looks like, never what it is: its length and alphabet, enough for an
 * operator to see "I pasted the key there" without the key reaching the screen.
 */
export function shapeOf(value: string): string {
  if (value === "") return "an empty value";
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(value))
    return `a ${value.length}-character hex value, the length of a private key`;
  if (/^[xt]prv/.test(value)) return "an extended private key";
  if (/^0x[0-9a-fA-F]*$/.test(value)) return `a ${value.length}-character hex value`;
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(value)) return `a ${value.length}-character URL`;
  const words = value.trim().split(/\s+/).length;
  if (words > 1) return `${words} words`;
  return `a ${value.length}-character value`;
}

function checkValue(flag: string, kind: FlagKind, value: string): void {
  switch (kind) {
    case "address":
      addressFlag(flag, value);
      return;
    case "amount":
      amountFlag(flag, value);
      return;
    case "integer":
      integerFlag(flag, value);
      return;
    case "entry-point":
      entryPointFlag(value);
      return;
    case "url":
      urlFlag(flag, value);
      return;
    case "xpub":
      xpubFlag(flag, value);
      return;
    case "file":
      if (value === "") throw new UsageError(`${flag} needs a file name, or - for standard input`);
      return;
  }
}

export function addressFlag(flag: string, value: string): Address {
  if (!isAddress(value, { strict: false }))
    throw new UsageError(`${flag} is not an address: got ${shapeOf(value)}`);
  return getAddress(value);
}

export function entryPointFlag(value: string): EntryPointVersion {
  const v = value.replace(/^v/, "");
  if (v === "0.7" || v === "0.8") return v;
  throw new UsageError(`--entry-point must be v0.7 or v0.8: got ${shapeOf(value)}`);
}

/** A non-negative integer within [min, max]; digits only (no "1e3", no "0x", no fractions). */
export function integerFlag(flag: string, value: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d{1,16}$/.test(value))
    throw new UsageError(`${flag} must be a whole number: got ${shapeOf(value)}`);
  const n = Number(value);
  if (n < min || n > max) throw new UsageError(`${flag} must be between ${min} and ${max}`);
  return n;
}

export function amountFlag(flag: string, value: string): bigint {
  const parsed = parseWei(value);
  if (!parsed.ok) throw new UsageError(`${flag} ${parsed.reason}: got ${shapeOf(value)}`);
  return parsed.wei;
}

/** The RPC's URL: http(s) or ws(s). The URL itself is never repeated (provider URLs carry API keys). */
export function urlFlag(flag: string, value: string): string {
  let protocol: string;
  try {
    protocol = new URL(value).protocol;
  } catch {
    throw new UsageError(`${flag} is not a URL: got ${shapeOf(value)}`);
  }
  if (!["http:", "https:", "ws:", "wss:"].includes(protocol))
    throw new UsageError(`${flag} must be an http(s) or ws(s) URL`);
  return value;
}

/** An extended public key (xpub or tpub); an extended private key is refused before it goes further. */
export function xpubFlag(flag: string, value: string): string {
  if (/^[xt]prv/.test(value))
    throw new UsageError(
      `${flag} holds a private key: the plan needs only the public key (and keys never go on a command line)`,
    );
  if (!/^[xt]pub[1-9A-HJ-NP-Za-km-z]{100,112}$/.test(value))
    throw new UsageError(`${flag} is not an extended public key: got ${shapeOf(value)}`);
  return value;
}
