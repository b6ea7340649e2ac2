/**
 * The operator CLI never prints a value that could be a secret (issue 20). A private key, an API
 * key, an RPC URL with a password and a mnemonic are put, one at a time, in every flag of every
 * command, as the positional argument, as the command and as an unknown option's name; no output
 * contains them (nor a key's hex without 0x), and each such mistake exits 2 like any usage error.
 *
 * The slots come from the CLI's own definition (COMMANDS, FLAGS, CONNECTION_FLAGS in
 * src/operator/args.ts), so a flag added there is covered without touching this file. The whole
 * matrix runs in process through runCli, the function src/operator/main.ts calls; every slot runs
 * once more as a child process of the real script with a private key, the case that was reported.
 * No chain is needed: every refusal comes before anything is read (the RPC is a closed port).
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HDKey } from "@scure/bip32";
import { english, generateMnemonic, generatePrivateKey } from "viem/accounts";
import {
  COMMANDS,
  CONNECTION_FLAGS,
  type CommandName,
  type CommandSpec,
  FLAGS,
  type FlagKind,
} from "../src/operator/args.ts";
import { runCli } from "../src/operator/cli.ts";
import { runPaymasterCli } from "./support/operator-cli.ts";

/** Nothing listens there: a command that got as far as the RPC fails at once. */
const CLOSED_RPC = "http://127.0.0.1:9";

const privateKey = generatePrivateKey();
const apiKey = `gsk_${randomBytes(30).toString("base64url").replace(/[-_]/g, "x")}`;
const password = `pw-${randomBytes(12).toString("hex")}`;
const urlToken = randomBytes(16).toString("hex");
const rpcUrlWithPassword = `http://operator:${password}@127.0.0.1:9/v3/${urlToken}`;
const mnemonic = generateMnemonic(english);

/** Each secret with the parts of it that must never be printed either. */
const SECRETS: Record<string, { value: string; parts: string[] }> = {
  "a private key": { value: privateKey, parts: [privateKey.slice(2), privateKey.slice(2, 22)] },
  "an API key": { value: apiKey, parts: [apiKey.slice(4, 24)] },
  "an RPC URL with a password": { value: rpcUrlWithPassword, parts: [password, urlToken] },
  "a mnemonic": { value: mnemonic, parts: [mnemonic.split(" ").slice(0, 3).join(" ")] },
};
/** The environment's own key: never printed either. */
const operatorKey = generatePrivateKey();

let dir: string;
let planFile: string;
let xpub: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), "paymaster-cli-secrets-"));
  planFile = join(dir, "plan.json");
  writeFileSync(planFile, "{}");
  xpub = HDKey.fromMasterSeed(randomBytes(32)).derive("m/44'/60'/0'").publicExtendedKey;
});
after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A value each kind of flag accepts, for the flags around the one under test. */
function validValue(kind: FlagKind): string {
  const values: Record<FlagKind, string> = {
    address: "0x00000000000000000000000000000000000000a1",
    amount: "1",
    integer: "1",
    url: CLOSED_RPC,
    "entry-point": "v0.7",
    xpub,
    file: planFile,
  };
  return values[kind];
}

const kindOf = (flag: string): FlagKind =>
  (FLAGS as Record<string, FlagKind>)[flag] ?? (CONNECTION_FLAGS as Record<string, FlagKind>)[flag]!;

/** Where a value can go on a command's line: each flag it takes, its positional, an unknown option. */
type Slot = { command: CommandName; where: string };

function slotsOf(command: CommandName): Slot[] {
  const spec: CommandSpec = COMMANDS[command];
  const connection = spec.offline ? ["paymaster"] : Object.keys(CONNECTION_FLAGS);
  return [
    ...[...spec.flags, ...connection].map((flag) => ({ command, where: `--${flag}` })),
    ...(spec.positional ? [{ command, where: "positional" }] : []),
    { command, where: "unknown option" },
  ];
}

/** The command line with `secret` in the slot and valid values everywhere else it needs one. */
function commandLine(slot: Slot, secret: string, joined = false): string[] {
  const spec: CommandSpec = COMMANDS[slot.command];
  const args: string[] = [slot.command];
  const put = (flag: string, value: string) =>
    joined ? args.push(`--${flag}=${value}`) : args.push(`--${flag}`, value);
  if (spec.positional) args.push(slot.where === "positional" ? secret : validValue("address"));
  const needed = [
    ...spec.required,
    ...(spec.needsEntryPoint ? ["entry-point"] : []),
    ...(spec.offline ? ["paymaster"] : []),
  ];
  for (const flag of needed) if (`--${flag}` !== slot.where) put(flag, validValue(kindOf(flag)));
  if (slot.where === "unknown option") args.push(`--${secret}`);
  else if (slot.where.startsWith("--")) put(slot.where.slice(2), secret);
  return args;
}

/** The one slot where a secret is a value the flag takes: the run goes on and fails later. */
const acceptedAsValue = (slot: Slot, secretName: string) =>
  slot.where === "--rpc-url" && secretName === "an RPC URL with a password";

function env(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    DATA_DIR: dir,
    CHAIN_14601_RPC_URL: CLOSED_RPC,
    OPERATOR_PRIVATE_KEY: operatorKey,
  };
}

function assertNothingSecret(output: string, secret: { value: string; parts: string[] }, what: string) {
  for (const part of [secret.value, ...secret.parts, operatorKey.slice(2)])
    assert.ok(!output.includes(part), `${what} printed a secret:\n${output}`);
}

async function inProcess(args: string[]): Promise<{ status: number; output: string }> {
  const lines: string[] = [];
  const status = await runCli(
    args,
    env(),
    { out: (l) => lines.push(l), err: (l) => lines.push(l) },
    () => "{}",
  );
  return { status, output: lines.join("\n") };
}

async function childProcess(args: string[]): Promise<{ status: number; output: string }> {
  const run = await runPaymasterCli(args, env());
  return { status: run.status, output: run.stdout + run.stderr };
}

const allSlots = () => [
  ...(Object.keys(COMMANDS) as CommandName[]).flatMap(slotsOf),
  { command: "deposit" as CommandName, where: "command" },
];

const argsFor = (slot: Slot, secret: string, joined = false) =>
  slot.where === "command" ? [secret, "--amount", "1"] : commandLine(slot, secret, joined);

describe("the operator CLI never prints a secret typed in the wrong place", () => {
  test("the definition covers every flag: each one is taken by some command", () => {
    const used = new Set(Object.values(COMMANDS).flatMap((s: CommandSpec) => s.flags as string[]));
    assert.deepEqual([...used].sort(), Object.keys(FLAGS).sort());
    assert.ok(allSlots().length > 40);
  });

  test("every slot of every command, every secret, as `--flag value` and `--flag=value`: exit 2, nothing echoed", async () => {
    let runs = 0;
    for (const slot of allSlots()) {
      for (const [name, secret] of Object.entries(SECRETS)) {
        const forms = slot.where.startsWith("--") ? [false, true] : [false];
        for (const joined of forms) {
          const args = argsFor(slot, secret.value, joined);
          const what = `${name} in ${slot.where} of ${slot.command}${joined ? " (joined)" : ""}`;
          const run = await inProcess(args);
          runs++;
          assertNothingSecret(run.output, secret, what);
          if (acceptedAsValue(slot, name)) assert.notEqual(run.status, 0, what);
          else assert.equal(run.status, 2, `${what}: ${run.output}`);
          assert.match(run.output, /^error: /, what);
        }
      }
    }
    assert.ok(runs > 300, `${runs} runs`);
  });

  test("as a child process (dist/operator/main.js): the secrets across the process boundary exit 2, nothing echoed", async () => {
    // The in-process test above covers every slot; here, what the process itself prints and its
    // exit code, once per kind of secret (each run is a node start-up with tsx, ~2 s).
    const secret = SECRETS["a private key"]!;
    const runs = [
      { slot: { command: "set-signer" as CommandName, where: "positional" }, name: "a private key", secret },
      // The reported case, and the other secrets once each across the process boundary.
      { slot: { command: "check" as CommandName, where: "--signer" }, name: "a private key", secret },
      {
        slot: { command: "withdraw" as CommandName, where: "--to" },
        name: "an API key",
        secret: SECRETS["an API key"]!,
      },
      {
        slot: { command: "deposit" as CommandName, where: "--rpc-url" },
        name: "an RPC URL with a password",
        secret: SECRETS["an RPC URL with a password"]!,
      },
      {
        slot: { command: "deposit" as CommandName, where: "command" },
        name: "a mnemonic",
        secret: SECRETS["a mnemonic"]!,
      },
    ];
    // Two at a time: each is a node start-up with tsx.
    for (let i = 0; i < runs.length; i += 2) {
      await Promise.all(
        runs.slice(i, i + 2).map(async ({ slot, name, secret }) => {
          const what = `${name} in ${slot.where} of ${slot.command} (child process)`;
          const run = await childProcess(argsFor(slot, secret.value));
          assertNothingSecret(run.output, secret, what);
          if (acceptedAsValue(slot, name)) assert.equal(run.status, 1, `${what}: ${run.output}`);
          else assert.equal(run.status, 2, `${what}: ${run.output}`);
          const lines = run.output.trim().split("\n");
          assert.equal(lines.length, 1, `${what}: one line\n${run.output}`);
          assert.match(lines[0]!, /^error: /, what);
        }),
      );
    }
  });

  test("the reported case reads well: --signer with a private key says what it looks like", async () => {
    const run = await inProcess(["check", "--signer", privateKey]);
    assert.equal(run.status, 2);
    assert.equal(
      run.output,
      "error: --signer is not an address: got a 66-character hex value, the length of a private key",
    );
  });
});
