import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { integerFlag, parseCommandLine, UsageError } from "./args.ts";

const command = (argv: string[]) => {
  const parsed = parseCommandLine(argv);
  assert.equal(parsed.kind, "command");
  return parsed.command;
};
const refused = (argv: string[], pattern: RegExp) =>
  assert.throws(
    () => parseCommandLine(argv),
    (err: unknown) => err instanceof UsageError && pattern.test(err.message),
  );

describe("parseCommandLine", () => {
  it("reads a command, its flags, its positional address and the connection flags", () => {
    const c = command([
      "rotate-signer",
      "0x00000000000000000000000000000000000000a1",
      "--previous-valid-for",
      "3900",
      "--rpc-url=http://127.0.0.1:8545",
      "--chain-id",
      "14601",
      "--entry-point",
      "v0.8",
      "--paymaster",
      "0x00000000000000000000000000000000000000b2",
    ]);
    assert.deepEqual(c, {
      name: "rotate-signer",
      address: "0x00000000000000000000000000000000000000a1",
      flags: { "previous-valid-for": "3900" },
      connection: {
        rpcUrl: "http://127.0.0.1:8545",
        chainId: 14601,
        entryPointVersion: "0.8",
        paymaster: "0x00000000000000000000000000000000000000b2",
      },
    });
    assert.equal(command(["check", "--entry-point", "0.7"]).connection.entryPointVersion, "0.7");
  });

  it("takes the chain as --chain or --chain-id, and refuses two different ones", () => {
    assert.equal(command(["check", "--chain", "146"]).connection.chainId, 146);
    assert.equal(command(["check", "--chain", "146", "--chain-id", "146"]).connection.chainId, 146);
    assert.equal(command(["check"]).connection.chainId, undefined);
    refused(["check", "--chain", "146", "--chain-id", "14601"], /give one of them/);
    refused(["check", "--chain", "sonic"], /--chain must be a whole number/);
  });

  it("answers help for no command, help, -h and --help", () => {
    for (const argv of [[], ["help"], ["-h"], ["--help"]]) assert.equal(parseCommandLine(argv).kind, "help");
  });

  it("refuses unknown commands and flags, missing values, missing or extra positionals", () => {
    refused(["frobnicate"], /^unknown command: got a 10-character value; see npm run paymaster -- help$/);
    refused(["deposit"], /deposit needs --amount/);
    refused(["deposit", "--amount"], /--amount needs a value/);
    refused(["deposit", "--amount", "--to", "0x00"], /--amount needs a value/);
    refused(["deposit", "--amount", "1", "--to", "0x00"], /--to is not an option of deposit/);
    refused(["set-signer"], /usage: .*set-signer <address>/);
    refused(["check", "0x00000000000000000000000000000000000000a1"], /usage: .*check/);
    refused(
      ["deploy", "--signer", "0x00000000000000000000000000000000000000a1"],
      /deploy needs --entry-point/,
    );
    refused(
      ["deploy", "--entry-point", "v0.9", "--signer", "0x00000000000000000000000000000000000000a1"],
      /v0.7 or v0.8/,
    );
    refused(["check", "--chain-id", "0x1"], /--chain-id must be a whole number/);
  });

  it("refuses any flag that would carry a key, before looking at anything else", () => {
    for (const flag of ["--private-key", "--privateKey=0xabc", "--key", "--xprv", "--mnemonic", "-secret"])
      refused(["deposit", flag, "x"], /keys are never taken on the command line/);
  });

  it("keeps sweep-sign offline: it needs --paymaster and takes no RPC, chain or EntryPoint", () => {
    assert.equal(
      command(["sweep-sign", "--plan", "-", "--paymaster", "0x00000000000000000000000000000000000000a1"])
        .name,
      "sweep-sign",
    );
    refused(["sweep-sign", "--plan", "-"], /needs --paymaster/);
    const offline = [
      "sweep-sign",
      "--plan",
      "-",
      "--paymaster",
      "0x00000000000000000000000000000000000000a1",
    ];
    for (const [flag, value] of [
      ["--rpc-url", "http://x"],
      ["--chain", "146"],
      ["--chain-id", "146"],
    ])
      refused([...offline, flag!, value!], new RegExp(`works offline: ${flag} does not apply`));
  });
});

describe("integerFlag", () => {
  it("takes digits within bounds only", () => {
    assert.equal(integerFlag("--n", "86400", 1, 86_400), 86_400);
    for (const bad of ["", "1.5", "1e3", "-1", "0x10", " 1"])
      assert.throws(() => integerFlag("--n", bad), UsageError);
    assert.throws(() => integerFlag("--n", "86401", 1, 86_400), /between 1 and 86400/);
  });
});
