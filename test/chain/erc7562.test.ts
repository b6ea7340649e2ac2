/**
 * The staked SponsorPaymaster passes the ERC-7562 validation rules a bundler enforces in safe
 * mode, shown by a trace-based check (test/support/erc7562.ts) because Alto's safe mode cannot
 * run EntryPoint v0.7 operations:
 *
 * - Alto 0.0.20 (and its main branch at b2bc09c6) validates a v0.7 operation in safe mode
 *   by tracing `PimlicoSimulations.simulateValidation`, then decodes the revert data of the last
 *   frame the tracer saw as a PimlicoSimulations error named `ValidationResult`. Since Alto's
 *   PR #556 (June 2025) that function no longer reverts: it calls the EntryPoint's
 *   `delegateAndRevert`, catches its `DelegateAndRevert(bool,bytes)` (0x99410554) and returns
 *   the result. So the last frame is always that caught revert, and the PimlicoSimulations ABI
 *   declares no errors at all: every `eth_sendUserOperation` fails with "Encoded error signature
 *   0x99410554 not found on ABI", on any node. No flag changes that: whatever contract the flags
 *   point it at, an ABI without errors can never decode one named ValidationResult.
 * - On anvil, Alto's tracer would also lose most of the validation: anvil's JavaScript tracer
 *   throws on a zero-length memory slice (Alto's tracer makes one for every log with no data)
 *   and then stops calling the tracer's step without failing the trace; only the factory's
 *   phase is recorded.
 * - Alto's parser enforces the banned opcodes of [OP-011] only on unstaked entities, so a
 *   staked paymaster reading block.timestamp would pass it anyway; ERC-7562 bans them for all.
 *
 * The last test here pins the first point: it fails when an Alto upgrade accepts the operation
 * in safe mode, and then this file should switch to Alto's safe mode.
 *
 * What the check shows: each sponsored operation (call authorization and whole-operation
 * authorization, the first one deploying its account, the next not) breaks no rule in any phase
 * with the paymaster staked, and then lands through handleOps exactly as traced. The same check
 * refuses a test paymaster (contracts/test/Erc7562Violator.sol, compiled here with solc) for
 * each violation it is told to commit, passes it when told to commit none, and refuses the real
 * SponsorPaymaster when it is not staked (it reads and writes its own storage).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import solc from "solc";
import {
  type Abi,
  type Address,
  concatHex,
  decodeAbiParameters,
  decodeEventLog,
  encodeFunctionData,
  getAddress,
  type Hex,
  hexToBigInt,
  keccak256,
  numberToHex,
  parseEther,
  slice,
  toHex,
} from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import { type Bundler, startBundler } from "../support/bundler.ts";
import { type DevChain, startChain } from "../support/chain/anvil.ts";
import {
  type DevnetStack,
  deployStack,
  gameItemsAbi,
  localArtifact,
  sponsorPaymasterAbi,
} from "../support/chain/devnet.ts";
import {
  checkErc7562,
  type Erc7562Check,
  erc7562Violations,
  MIN_UNSTAKE_DELAY_SEC,
  phaseOf,
  phaseOpcodes,
  type Violation,
} from "../support/erc7562.ts";
import {
  accountInitCode,
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  getAccountAddress,
  handleOps,
  randomAccount,
  type SponsoredOp,
  signUserOp,
  sponsoredUserOp,
} from "../support/userop.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const VIOLATOR_SOURCE = "contracts/test/Erc7562Violator.sol";

/** Erc7562Violator.Violation, in declaration order. */
const VIOLATIONS = [
  "None",
  "Timestamp",
  "GasLeft",
  "ForeignStorageWrite",
  "NoCodeCall",
  "ValueCall",
  "EntryPointCall",
] as const;
type ViolationName = (typeof VIOLATIONS)[number];

/** The rule each violation breaks, and a fragment of the check's explanation. */
const EXPECTED: Record<Exclude<ViolationName, "None">, { rule: string; detail: RegExp }> = {
  Timestamp: { rule: "OP-011", detail: /^TIMESTAMP/ },
  GasLeft: { rule: "OP-012", detail: /GAS not followed by a call/ },
  ForeignStorageWrite: {
    rule: "STO-033",
    detail: /write \(SSTORE\).*not associated with the sender or the entity/,
  },
  NoCodeCall: {
    rule: "OP-041",
    detail: /STATICCALL of 0x000000000000000000000000000000000000dEaD, which has no code/,
  },
  ValueCall: { rule: "OP-061", detail: /CALL with 1 wei/ },
  EntryPointCall: { rule: "OP-054", detail: /STATICCALL 0x70a08231 into the EntryPoint/ },
};

const VIOLATOR_VERIFICATION_GAS = 200_000n;

let chain: DevChain;
let stack: DevnetStack;
const signer = randomAccount();
let violator: Address;
let violatorAbi: Abi;

/** The same solc-js and settings as scripts/build-contracts.ts; imports resolve from node_modules. */
function compileViolator(): { abi: Abi; bytecode: Hex } {
  const input = {
    language: "Solidity",
    sources: { [VIOLATOR_SOURCE]: { content: readFileSync(join(ROOT, VIOLATOR_SOURCE), "utf8") } },
    settings: {
      evmVersion: "cancun",
      optimizer: { enabled: true, runs: 10_000 },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const readImport = (unit: string) => {
    const clean = normalize(unit);
    if (clean.startsWith("..")) return { error: `import outside the repository: ${unit}` };
    try {
      return { contents: readFileSync(join(ROOT, "node_modules", clean), "utf8") };
    } catch {
      return { error: `not found: ${unit}` };
    }
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: readImport })) as {
    errors?: { severity: string; formattedMessage: string }[];
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join("\n"));
  const compiled = output.contracts[VIOLATOR_SOURCE]?.Erc7562Violator;
  if (!compiled) throw new Error("solc produced no Erc7562Violator");
  return { abi: compiled.abi, bytecode: `0x${compiled.evm.bytecode.object}` };
}

async function confirmed(hash: Hex) {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success", `transaction ${hash} reverted`);
  return receipt;
}

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });

  const artifact = compileViolator();
  violatorAbi = artifact.abi;
  const deployer = chain.wallets[0]!;
  const receipt = await confirmed(
    await deployer.deployContract({
      abi: artifact.abi,
      bytecode: artifact.bytecode,
      args: [stack.entryPoint],
      // For the ValueCall violation, which sends 1 wei.
      value: 1_000n,
    }),
  );
  violator = getAddress(receipt.contractAddress!);
  await confirmed(
    await deployer.writeContract({
      address: violator,
      abi: violatorAbi,
      functionName: "deposit",
      value: parseEther("1"),
    }),
  );
  // Staked like the SponsorPaymaster: whatever it breaks, it is not for lack of a stake.
  await confirmed(
    await deployer.writeContract({
      address: violator,
      abi: violatorAbi,
      functionName: "addStake",
      args: [MIN_UNSTAKE_DELAY_SEC],
      value: parseEther("1"),
    }),
  );
});

after(async () => {
  await chain?.stop();
});

const mint = (itemId: bigint) =>
  encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [itemId] });

function check(userOp: PackedUserOperation): Promise<Erc7562Check> {
  return checkErc7562(chain.publicClient, {
    rpcUrl: chain.rpcUrl,
    entryPoint: stack.entryPoint,
    userOp,
    bundler: chain.wallets[1]!.account.address,
  });
}

const describeViolations = (violations: Violation[]) =>
  violations.map((v) => `${v.rule} ${v.entity}: ${v.detail}`).join("\n");

/** The validationData a phase's call returned: validatePaymasterUserOp returns (bytes, uint256). */
function paymasterValidationData(result: Erc7562Check): bigint {
  const phase = phaseOf(result.trace, "paymaster");
  assert.equal(phase.error, null, `validatePaymasterUserOp failed: ${phase.error} ${phase.output}`);
  const [context, validationData] = decodeAbiParameters(
    [{ type: "bytes" }, { type: "uint256" }],
    phase.output,
  );
  assert.equal(context, "0x", "no context: the EntryPoint never calls postOp");
  return validationData;
}

/** Submits the operation as traced and returns its UserOperationEvent. */
async function land(op: PackedUserOperation) {
  const receipt = await handleOps(chain.publicClient, chain.wallets[1]!, stack.entryPoint, [op]);
  assert.equal(receipt.status, "success");
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== stack.entryPoint.toLowerCase()) continue;
    try {
      const event = decodeEventLog({ abi: entryPoint07Abi, ...log });
      if (event.eventName === "UserOperationEvent") return event.args;
    } catch {
      // Another EntryPoint event.
    }
  }
  throw new Error("no UserOperationEvent");
}

describe("ERC-7562: the staked SponsorPaymaster, by a trace of handleOps on anvil", () => {
  for (const mode of ["call", "operation"] as const) {
    test(`mode ${mode === "call" ? 0 : 1} (${mode} authorization): breaks no rule in any phase, then lands as traced`, async (t) => {
      const owner = randomAccount();
      for (const [itemId, deploys] of [
        [1n, true],
        [2n, false],
      ] as const) {
        // The second operation binds the deployed account's code hash, so the paymaster's
        // validation reads EXTCODEHASH(sender): the trace shows that this stays within the rules.
        const sender = deploys
          ? null
          : await getAccountAddress(chain.publicClient, stack.accountFactory, owner.address);
        const code = sender ? await chain.publicClient.getCode({ address: sender }) : undefined;
        const op: SponsoredOp = await sponsoredUserOp({
          chain,
          stack,
          signer,
          owner,
          mode,
          target: stack.gameItems,
          data: mint(itemId),
          ...(code ? { authorization: { senderCodeHash: keccak256(code) } } : {}),
        });
        assert.equal(op.userOp.initCode !== "0x", deploys);
        const result = await check(op.userOp);
        assert.deepEqual(result.violations, [], describeViolations(result.violations));

        // The check saw what matters: a staked paymaster, and every phase of this operation.
        assert.equal(result.entities.stake.paymaster?.staked, true);
        assert.equal(result.entities.stake.factory?.staked ?? false, false, "the factory is not staked");
        assert.deepEqual(
          result.trace.phases.map((p) => p.entity),
          deploys ? ["factory", "account", "paymaster"] : ["account", "paymaster"],
        );
        // The paymaster's validation did what the contract says: read the signer and write
        // userOpHashOf[authId] in its own storage (allowed only because it is staked), log
        // SponsorshipUsed, recover the signature with the ecrecover precompile.
        const phase = phaseOf(result.trace, "paymaster");
        const own = phase.storage.filter((s) => s.address === stack.paymaster);
        assert.ok(own.some((s) => s.op === "SLOAD"));
        assert.ok(own.some((s) => s.op === "SSTORE"));
        assert.deepEqual(
          phase.storage.filter((s) => s.address !== stack.paymaster),
          [],
          "no storage but its own",
        );
        const opcodes = phaseOpcodes(phase);
        assert.ok((opcodes.LOG4 ?? 0) > 0, "SponsorshipUsed");
        // EXTCODEHASH of the sender when the code hash is bound (the sender is an entity: its
        // code may be read), and the ecrecover precompile; no other code.
        assert.deepEqual(
          phase.code.map((c) => [c.op, hexToBigInt(c.address)]),
          [...(code ? [["EXTCODEHASH", hexToBigInt(op.sender)]] : []), ["STATICCALL", 1n]],
          "EXTCODEHASH(sender) when bound, ecrecover, and no other code used",
        );
        const validationData = paymasterValidationData(result);
        assert.equal(validationData & 1n, 0n, "the authorization's signature is valid");
        t.diagnostic(
          `${deploys ? "first" : "second"} operation: phases ${result.trace.phases.map((p) => p.entity).join(", ")}; paymaster opcodes ${Object.keys(opcodes).length} kinds, storage ${phase.storage.map((s) => `${s.op} ${s.slot.slice(0, 10)}…`).join(", ")}`,
        );

        const event = await land(op.userOp);
        assert.equal(event.userOpHash, op.userOpHash);
        assert.equal(event.success, true);
        assert.equal(getAddress(event.paymaster), stack.paymaster);
        const recorded = await chain.publicClient.readContract({
          address: stack.paymaster,
          abi: sponsorPaymasterAbi,
          functionName: "userOpHashOf",
          args: [op.authId],
        });
        assert.equal(recorded, op.userOpHash);
      }
    });
  }
});

/** A signed operation from a new SimpleAccount, paid by the violator told to commit `violation`. */
async function violatorOp(violation: ViolationName): Promise<PackedUserOperation> {
  const owner = randomAccount();
  const sender = await getAccountAddress(chain.publicClient, stack.accountFactory, owner.address);
  const paymasterAndData = concatHex([
    violator,
    numberToHex(VIOLATOR_VERIFICATION_GAS, { size: 16 }),
    numberToHex(0n, { size: 16 }),
    numberToHex(VIOLATIONS.indexOf(violation), { size: 1 }),
  ]);
  const unsigned = buildUserOp({
    sender,
    nonce: 0n,
    initCode: accountInitCode(stack.accountFactory, owner.address),
    callData: executeCallData(stack.gameItems, mint(3n)),
    gas: devnetUserOpGas,
    paymasterAndData,
  });
  return (await signUserOp(chain.publicClient, stack.entryPoint, owner, unsigned)).userOp;
}

describe("ERC-7562: the check refuses what breaks the rules", () => {
  test("a staked test paymaster passes when it breaks nothing, and is refused for each violation, on exactly its rule", async (t) => {
    for (const violation of VIOLATIONS) {
      const result = await check(await violatorOp(violation));
      // The EntryPoint itself would accept every one of these: validation returns normally, unsigned.
      assert.equal(paymasterValidationData(result), 0n, violation);
      assert.equal(result.entities.stake.paymaster?.staked, true);
      if (violation === "None") {
        assert.deepEqual(result.violations, [], describeViolations(result.violations));
        continue;
      }
      const expected = EXPECTED[violation];
      assert.ok(result.violations.length > 0, `${violation}: not refused`);
      for (const v of result.violations) {
        assert.equal(v.entity, "paymaster", `${violation}: ${describeViolations([v])}`);
        assert.equal(v.rule, expected.rule, `${violation}: ${describeViolations([v])}`);
      }
      assert.ok(
        result.violations.some((v) => expected.detail.test(v.detail)),
        `${violation}: ${describeViolations(result.violations)}`,
      );
      t.diagnostic(`${violation}: ${describeViolations(result.violations)}`);
    }
  });

  test("a trace that lost a phase or hit a tracer error is refused, never passed", async () => {
    const result = await check(await violatorOp("None"));
    assert.deepEqual(result.violations, []);
    const withoutPaymaster = {
      ...result.trace,
      phases: result.trace.phases.filter((p) => p.entity !== "paymaster"),
    };
    assert.deepEqual(
      erc7562Violations(withoutPaymaster, result.entities).map((v) => [v.rule, v.detail]),
      [["TRACE", "no paymaster validation phase in the trace"]],
    );
    const withError = { ...result.trace, tracerErrors: ["step: TypeError: out of bound memory"] };
    assert.deepEqual(
      erc7562Violations(withError, result.entities).map((v) => v.rule),
      ["TRACE"],
    );
  });

  test("the SponsorPaymaster without a stake is refused: it reads and writes its own storage (STO-031)", async () => {
    const deployer = chain.wallets[0]!;
    const artifact = localArtifact("SponsorPaymaster");
    const receipt = await confirmed(
      await deployer.deployContract({
        abi: artifact.abi,
        bytecode: artifact.bytecode,
        args: [stack.entryPoint, signer.address],
      }),
    );
    const unstaked = getAddress(receipt.contractAddress!);
    await confirmed(
      await deployer.writeContract({
        address: unstaked,
        abi: sponsorPaymasterAbi,
        functionName: "deposit",
        value: parseEther("1"),
      }),
    );
    const op = await sponsoredUserOp({
      chain,
      stack: { ...stack, paymaster: unstaked },
      signer,
      owner: randomAccount(),
      target: stack.gameItems,
      data: mint(4n),
    });
    const result = await check(op.userOp);
    assert.equal(result.entities.stake.paymaster?.staked, false);
    assert.equal(paymasterValidationData(result) & 1n, 0n, "the EntryPoint would accept it");
    assert.ok(result.violations.length > 0, "not refused");
    for (const v of result.violations) {
      assert.equal(v.entity, "paymaster", describeViolations([v]));
      assert.equal(v.rule, "STO-031", describeViolations([v]));
      assert.match(v.detail, /its own storage, entity unstaked/);
    }
    const kinds = new Set(result.violations.map((v) => v.detail.split(" ")[0]));
    assert.deepEqual([...kinds].sort(), ["read", "write"]);
  });
});

/** A v0.7 operation in the JSON-RPC form bundlers take (unpacked fields). */
function rpcUserOp(op: PackedUserOperation): Record<string, Hex> {
  const high = (word: Hex) => toHex(hexToBigInt(slice(word, 0, 16)));
  const low = (word: Hex) => toHex(hexToBigInt(slice(word, 16, 32)));
  const out: Record<string, Hex> = {
    sender: op.sender,
    nonce: toHex(op.nonce),
    callData: op.callData,
    verificationGasLimit: high(op.accountGasLimits),
    callGasLimit: low(op.accountGasLimits),
    preVerificationGas: toHex(op.preVerificationGas),
    maxPriorityFeePerGas: high(op.gasFees),
    maxFeePerGas: low(op.gasFees),
    signature: op.signature,
  };
  if (op.initCode !== "0x") {
    out.factory = slice(op.initCode, 0, 20);
    out.factoryData = slice(op.initCode, 20);
  }
  if (op.paymasterAndData !== "0x") {
    out.paymaster = slice(op.paymasterAndData, 0, 20);
    out.paymasterVerificationGasLimit = toHex(hexToBigInt(slice(op.paymasterAndData, 20, 36)));
    out.paymasterPostOpGasLimit = toHex(hexToBigInt(slice(op.paymasterAndData, 36, 52)));
    out.paymasterData = slice(op.paymasterAndData, 52);
  }
  return out;
}

describe("Alto's safe mode (why the check above is not Alto's)", () => {
  let bundler: Bundler | undefined;
  after(async () => {
    await bundler?.stop();
  });

  test("Alto 0.0.20 in safe mode refuses an operation that passes the check, with DelegateAndRevert undecodable", async () => {
    bundler = await startBundler({
      rpcUrl: chain.rpcUrl,
      entryPoints: [stack.entryPoint],
      flags: { "safe-mode": "true" },
    });
    const op = await sponsoredUserOp({
      chain,
      stack,
      signer,
      owner: randomAccount(),
      target: stack.gameItems,
      data: mint(5n),
      // Above what Alto's v2 route asks for, so that only validation can refuse it.
      gas: { ...devnetUserOpGas, preVerificationGas: 200_000n },
    });
    const result = await check(op.userOp);
    assert.deepEqual(result.violations, [], describeViolations(result.violations));

    const res = await fetch(bundler.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "eth_sendUserOperation",
        params: [rpcUserOp(op.userOp), stack.entryPoint],
      }),
    });
    const reply = (await res.json()) as { result?: Hex; error?: { message: string } };
    assert.ok(
      reply.error,
      `Alto's safe mode accepted the operation (${reply.result}): it works now, so show ERC-7562 with it ` +
        "instead of the trace-based check (see this file's header)",
    );
    assert.match(
      reply.error.message,
      /Encoded error signature "0x99410554" not found on ABI/,
      bundler.output(),
    );
  });
});
