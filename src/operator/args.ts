/**
 * The operator CLI's command line, parsed into one command value with no I/O: which command, its
 * typed options, and the connection flags. A mistake is a UsageError (exit status 2) whose message
 * never quotes a value that could be a secret pasted in the wrong place.
 */
import { parseArgs } from "node:util";
import type { EntryPointVersion } from "../config.ts";
import { parseWei } from "./amount.ts";
import type { ConnectionFlags } from "./context.ts";

export class UsageError extends Error {}

type FlagName =
  | "amount"
  | "count"
  | "fee-per-gas"
  | "from-index"
  | "min-deposit"
  | "min-stake"
  | "min-unstake-delay"
  | "owner"
  | "plan"
  | "previous-valid-for"
  | "priority-fee-per-gas"
  | "signed"
  | "signer"
  | "to"
  | "unstake-delay"
  | "xpub";

interface CommandSpec {
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

const SPECS = {
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

export type CommandName = keyof typeof SPECS;

export interface ParsedCommand {
  name: CommandName;
  connection: ConnectionFlags;
  /** The positional address of set-signer and rotate-signer. */
  address?: string;
  flags: Partial<Record<FlagName, string>>;
}

export type Parsed = { kind: "help"; text: string } | { kind: "command"; command: ParsedCommand };

const CONNECTION_USAGE =
  "connection: [--rpc-url <url>] [--chain-id <id>] [--entry-point v0.7|v0.8] [--paymaster <address>]\n" +
  "(defaults: CHAIN_<id>_RPC_URL, chain 14601, v0.7, CHAIN_<id>_PAYMASTER_ADDRESS or _PAYMASTER_V08_ADDRESS)";

export function usage(): string {
  const lines = Object.values(SPECS).map((s) => `  npm run paymaster -- ${s.usage}`);
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
  if (!Object.hasOwn(SPECS, name))
    throw new UsageError(`unknown command "${name}"; see npm run paymaster -- help`);
  const commandName = name as CommandName;
  const spec: CommandSpec = SPECS[commandName];

  const known = new Set<string>([...spec.flags, "rpc-url", "chain-id", "entry-point", "paymaster"]);
  const options = Object.fromEntries([...known].map((f) => [f, { type: "string" as const }]));
  let parsed: { values: Record<string, string | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...rest], options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(explainParseError((err as Error).message, commandName, spec.usage));
  }
  const values = parsed.values as Record<string, string>;
  for (const flag of spec.required) {
    if (values[flag] === undefined) throw new UsageError(`${commandName} needs --${flag}: ${spec.usage}`);
  }
  if (spec.needsEntryPoint && values["entry-point"] === undefined) {
    throw new UsageError(`${commandName} needs --entry-point: ${spec.usage}`);
  }
  if (spec.offline) {
    for (const f of ["rpc-url", "chain-id", "entry-point"])
      if (values[f] !== undefined)
        throw new UsageError(`${commandName} works offline: --${f} does not apply`);
    if (values.paymaster === undefined)
      throw new UsageError(`${commandName} needs --paymaster: ${spec.usage}`);
  }
  const positionals = parsed.positionals;
  if (positionals.length !== (spec.positional ? 1 : 0)) {
    throw new UsageError(`usage: npm run paymaster -- ${spec.usage}`);
  }

  const flags: ParsedCommand["flags"] = {};
  for (const f of spec.flags) if (values[f] !== undefined) flags[f] = values[f];
  return {
    kind: "command",
    command: {
      name: commandName,
      connection: {
        rpcUrl: values["rpc-url"],
        chainId:
          values["chain-id"] === undefined ? undefined : integerFlag("--chain-id", values["chain-id"], 1),
        paymaster: values.paymaster,
        entryPointVersion:
          values["entry-point"] === undefined ? undefined : entryPointFlag(values["entry-point"]),
      },
      address: positionals[0],
      flags,
    },
  };
}

/** node's parseArgs messages, reworded for this CLI and cut to one line. */
function explainParseError(message: string, command: string, usageLine: string): string {
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) return `${unknown[1]} is not an option of ${command}: ${usageLine}`;
  const noValue = /Option '(--[\w-]+)[^']*' argument (missing|is ambiguous)/.exec(message);
  if (noValue) return `${noValue[1]} needs a value: ${usageLine}`;
  return message.split("\n")[0]!;
}

export function entryPointFlag(value: string): EntryPointVersion {
  const v = value.replace(/^v/, "");
  if (v === "0.7" || v === "0.8") return v;
  throw new UsageError(`--entry-point must be v0.7 or v0.8, not "${value}"`);
}

/** A non-negative integer within [min, max]; digits only (no "1e3", no "0x", no fractions). */
export function integerFlag(flag: string, value: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d{1,16}$/.test(value)) throw new UsageError(`${flag} must be a whole number, not "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new UsageError(`${flag} must be between ${min} and ${max}`);
  return n;
}

export function amountFlag(flag: string, value: string): bigint {
  const parsed = parseWei(value);
  if (!parsed.ok) throw new UsageError(`${flag}: ${parsed.reason}`);
  return parsed.wei;
}
