/**
 * SponsorPaymasterV08 against the real EntryPoint v0.8 on anvil, beside the v0.7 build: both
 * builds of the one source verify the same EIP-712 digests the service computes; sponsored
 * operations from v0.8's SimpleAccount and from an EOA delegated to Simple7702Account by an
 * EIP-7702 authorization in the bundle run, link themselves by SponsorshipUsed and are paid from
 * the paymaster's v0.8 deposit; a whole-operation authorization binds the EIP-7702 delegate; the
 * refusals are those of v0.7; and PAYMASTER_GAS_LIMITS covers what v0.8 measures.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Abi,
  type AbiParameter,
  type Address,
  concatHex,
  decodeErrorResult,
  encodeAbiParameters,
  encodeFunctionData,
  type Hex,
  keccak256,
  type Log,
  parseAbi,
  parseEventLogs,
  slice,
  toFunctionSelector,
  toHex,
  zeroHash,
} from "viem";
import { entryPoint08Abi, type PackedUserOperation } from "viem/account-abstraction";
import {
  type CallAuthorization,
  callSponsorshipDigest,
  operationSponsorshipDigest,
  type SponsoredOperation,
} from "../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS, type PaymasterGasLimits } from "../../src/paymaster/gas.ts";
import { encodeOperationPaymasterAndData, type PaymasterMode } from "../../src/paymaster/layout.ts";
import { type DevChain, type DevnetStack, deployStack, startChain } from "../support/anvil.ts";
import {
  accountAbstractionV08Artifact,
  CREATE2_DEPLOYER_ADDRESS,
  type DevnetStackV08,
  ENTRY_POINT_V08_ADDRESS,
  gameItemsAbi,
  localArtifact,
  SIMPLE_7702_ACCOUNT_V08_ADDRESS,
  SIMPLE_ACCOUNT_FACTORY_V08_ADDRESS,
  sponsorPaymasterAbi,
} from "../support/chain/devnet.ts";
import { smallestAccepted } from "../support/gas-search.ts";
import {
  delegateEoa,
  delegationCode,
  delegationOverride,
  type FailedOp,
  handleOps,
  latestTimestampSec,
  packUint128Pair,
  randomAccount,
  type SponsoredOp,
  type SponsoredOpParams,
  signDelegation,
  signUserOp,
  simulateHandleOps,
  sponsoredUserOp,
} from "../support/userop.ts";

const ITEM_ID = 42n;
const mintCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
const MODES: PaymasterMode[] = ["call", "operation"];
const MARKER_PADDED: Hex = `0x7702${"00".repeat(18)}`;

let chain: DevChain;
let stack: DevnetStack;
let v08: DevnetStackV08;
const signer = randomAccount();

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });
  v08 = stack.v08;
});

after(async () => {
  await chain?.stop();
});

const bundler = () => chain.wallets[1]!;

const getDeposit = () =>
  chain.publicClient.readContract({
    address: v08.paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "getDeposit",
  });

const userOpHashOf = (authId: Hex) =>
  chain.publicClient.readContract({
    address: v08.paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "userOpHashOf",
    args: [authId],
  });

const itemCount = (player: Address) =>
  chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [player, ITEM_ID],
  });

/** What the operation needs besides its account: the v0.8 stack, the service's key, a mint. */
function opFor(overrides: Partial<SponsoredOpParams> = {}): Promise<SponsoredOp> {
  const account = overrides.sender || overrides.eip7702 ? {} : { owner: overrides.owner ?? randomAccount() };
  return sponsoredUserOp({
    chain,
    stack: v08,
    signer,
    target: stack.gameItems,
    data: mintCall,
    ...account,
    ...overrides,
  });
}

function receiptEvents(logs: Log[]) {
  return {
    userOps: parseEventLogs({ abi: entryPoint08Abi, logs, eventName: "UserOperationEvent" }),
    used: parseEventLogs({ abi: sponsorPaymasterAbi, logs, eventName: "SponsorshipUsed" }),
  };
}

/** A fresh EOA to send through EIP-7702, with the authorization the bundle will carry. */
async function fresh7702(delegate: Address = v08.simple7702Account) {
  const account = randomAccount();
  const authorization = await signDelegation(chain.publicClient, account, delegate);
  return { eip7702: { account, delegate }, authorization };
}

/**
 * Refused twice over, as on v0.7: the bundler's simulation gets FailedOp, and the same handleOps
 * mined with a fixed gas limit reverts, leaving no item minted and the authorization unused.
 */
async function assertRefused(op: SponsoredOp, reason: string, minted = 0n): Promise<FailedOp> {
  const usedBefore = await userOpHashOf(op.authId);
  const failed = await simulateHandleOps(chain.publicClient, bundler().account.address, v08.entryPoint, [
    op.userOp,
  ]);
  assert.ok(failed, "the EntryPoint should refuse the operation");
  assert.equal(failed.reason, reason);
  const receipt = await handleOps(chain.publicClient, bundler(), v08.entryPoint, [op.userOp], {
    gas: 3_000_000n,
  });
  assert.equal(receipt.status, "reverted");
  assert.equal(await itemCount(op.sender), minted);
  assert.equal(await userOpHashOf(op.authId), usedBefore);
  return failed;
}

describe("the EntryPoint v0.8 stack on anvil", () => {
  test("EntryPoint v0.8, Simple7702Account and SimpleAccountFactory are at their canonical addresses, by CREATE2", async () => {
    assert.equal(v08.entryPoint, ENTRY_POINT_V08_ADDRESS);
    assert.equal(v08.entryPoint, "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108");
    assert.equal(v08.entryPointDeployment, "create2");
    assert.equal(v08.simple7702Account, SIMPLE_7702_ACCOUNT_V08_ADDRESS);
    assert.equal(v08.accountFactory, SIMPLE_ACCOUNT_FACTORY_V08_ADDRESS);
    // Simple7702Account has no immutables: its code is the release's runtime code byte for byte.
    const code = await chain.publicClient.getCode({ address: v08.simple7702Account });
    assert.ok(
      code === accountAbstractionV08Artifact("Simple7702Account").deployedBytecode,
      "release runtime code",
    );
    const senderCreator = await chain.publicClient.readContract({
      address: v08.entryPoint,
      abi: parseAbi([
        "function supportsInterface(bytes4) view returns (bool)",
        "function senderCreator() view returns (address)",
      ]),
      functionName: "senderCreator",
    });
    assert.ok(
      await chain.publicClient.getCode({ address: senderCreator }),
      "the EntryPoint created its SenderCreator",
    );
    // The v0.7 half is where it always was.
    assert.equal(stack.entryPoint, "0x0000000071727De22E5E9d8BAf0edAc6f37da032");
    assert.ok(await chain.publicClient.getCode({ address: CREATE2_DEPLOYER_ADDRESS }));
  });

  test("SponsorPaymasterV08 is bound to EntryPoint v0.8, funded and staked there", async () => {
    const read = <T>(functionName: "entryPoint" | "signer" | "getDeposit") =>
      chain.publicClient.readContract({
        address: v08.paymaster,
        abi: sponsorPaymasterAbi,
        functionName,
      }) as Promise<T>;
    assert.equal(await read<Address>("entryPoint"), v08.entryPoint);
    assert.equal(await read<Address>("signer"), signer.address);
    assert.ok((await read<bigint>("getDeposit")) > 0n);
    const info = await chain.publicClient.readContract({
      address: v08.entryPoint,
      abi: entryPoint08Abi,
      functionName: "getDepositInfo",
      args: [v08.paymaster],
    });
    assert.equal(info.staked, true);
  });

  test("src/paymaster/abi.ts describes the v0.8 build too: every item is in its ABI, and every event and error of its own is in abi.ts", () => {
    const compiled = localArtifact("SponsorPaymasterV08").abi;
    const known = new Set(compiled.map(shape));
    for (const item of sponsorPaymasterAbi)
      assert.ok(known.has(shape(item)), `not in the v0.8 ABI: ${shape(item)}`);
    const handWritten = new Set(sponsorPaymasterAbi.map(shape));
    // OpenZeppelin's (Ownable2Step, EIP712): not ours to decode.
    const inherited = new Set([
      "OwnershipTransferred",
      "OwnershipTransferStarted",
      "OwnableUnauthorizedAccount",
      "OwnableInvalidOwner",
      "EIP712DomainChanged",
      "InvalidShortString",
      "StringTooLong",
    ]);
    for (const item of compiled) {
      if ((item.type === "event" || item.type === "error") && !inherited.has(item.name))
        assert.ok(handWritten.has(shape(item)), `missing from src/paymaster/abi.ts: ${shape(item)}`);
    }
  });

  test("SponsorPaymasterV08 cannot be deployed against EntryPoint v0.7 (its ERC-165 check refuses)", async () => {
    const artifact = localArtifact("SponsorPaymasterV08");
    await assert.rejects(
      chain.wallets[0]!.deployContract({
        abi: artifact.abi,
        bytecode: artifact.bytecode,
        args: [stack.entryPoint, signer.address],
      }),
      /reverted/,
    );
  });
});

describe("both builds verify the digests the service computes", () => {
  const gas: PaymasterGasLimits = { verificationGasLimit: 70_000n, postOpGasLimit: 0n };
  const call: CallAuthorization = {
    sender: "0x1111111111111111111111111111111111111111",
    senderCodeHash: "0x5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0d",
    initCode: "0x7702",
    target: "0x2222222222222222222222222222222222222222",
    selector: toFunctionSelector("mint(uint256)"),
    maxTotalGas: 830_000n,
    maxPreVerificationGas: 66_000n,
    maxFeePerGasWei: 3_000_000_000n,
    maxPriorityFeePerGasWei: 1_000_000_000n,
    validUntilSec: 1_800_000_300,
    validAfterSec: 1_800_000_000,
    authId: "0x6a1c5b3ef2d04c0f9e8b7a6d5c4b3a2918f7e6d5c4b3a29180f7e6d5c4b3a291",
  };
  const terms = {
    validUntilSec: call.validUntilSec,
    validAfterSec: call.validAfterSec,
    authId: call.authId,
    senderCodeHash: call.senderCodeHash,
  };
  const operation: SponsoredOperation = {
    sender: "0x1111111111111111111111111111111111111111",
    nonce: 7n,
    initCode: "0x3333333333333333333333333333333333333333deadbeef",
    callData: mintCall,
    accountGasLimits: packUint128Pair(500_000n, 200_000n),
    preVerificationGas: 60_000n,
    gasFees: packUint128Pair(1_000_000_000n, 3_000_000_000n),
  };
  const builds = () =>
    [
      ["v0.7", stack.paymaster],
      ["v0.8", v08.paymaster],
    ] as const;

  /** paymasterAndData carrying only what getOperationHash reads: the paymaster's gas limits. */
  const limitsOnly = (paymaster: Address) =>
    encodeOperationPaymasterAndData(
      { chainId: chain.chainId, paymaster },
      gas,
      { validUntilSec: 1, validAfterSec: 0, authId: zeroHash, senderCodeHash: zeroHash },
      `0x${"99".repeat(65)}`,
    );

  const getOperationHash = (paymaster: Address, op: SponsoredOperation) =>
    chain.publicClient.readContract({
      address: paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "getOperationHash",
      args: [
        {
          sender: op.sender,
          nonce: op.nonce,
          initCode: op.initCode,
          callData: op.callData,
          accountGasLimits: op.accountGasLimits,
          preVerificationGas: op.preVerificationGas,
          gasFees: op.gasFees,
          paymasterAndData: limitsOnly(paymaster),
          signature: "0x1234",
        },
        terms.senderCodeHash,
        terms.validUntilSec,
        terms.validAfterSec,
        terms.authId,
      ],
    });

  test("getCallHash of each build equals callSponsorshipDigest for its own address", async () => {
    for (const [build, paymaster] of builds()) {
      const onChain = await chain.publicClient.readContract({
        address: paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "getCallHash",
        args: [
          {
            sender: call.sender,
            senderCodeHash: call.senderCodeHash,
            initCodeHash: keccak256(call.initCode),
            target: call.target,
            selector: call.selector,
            maxTotalGas: call.maxTotalGas,
            maxPreVerificationGas: call.maxPreVerificationGas,
            maxFeePerGas: call.maxFeePerGasWei,
            maxPriorityFeePerGas: call.maxPriorityFeePerGasWei,
            paymasterVerificationGasLimit: gas.verificationGasLimit,
            paymasterPostOpGasLimit: gas.postOpGasLimit,
            validUntil: call.validUntilSec,
            validAfter: call.validAfterSec,
            authId: call.authId,
          },
        ],
      });
      assert.equal(onChain, callSponsorshipDigest({ chainId: chain.chainId, paymaster }, gas, call), build);
    }
  });

  test("getOperationHash of each build equals operationSponsorshipDigest for a factory initCode and for none", async () => {
    for (const [build, paymaster] of builds()) {
      for (const op of [operation, { ...operation, initCode: "0x" as Hex }]) {
        const expected = operationSponsorshipDigest({ chainId: chain.chainId, paymaster }, gas, op, terms);
        assert.equal(await getOperationHash(paymaster, op), expected, `${build}, initCode ${op.initCode}`);
      }
    }
  });

  test("both builds have the same type hashes, domain name and version", async () => {
    const eip712Domain = parseAbi([
      "function eip712Domain() view returns (bytes1, string, string, uint256, address, bytes32, uint256[])",
    ]);
    const seen = new Set<string>();
    for (const [, paymaster] of builds()) {
      const read = (functionName: "CALL_SPONSORSHIP_TYPEHASH" | "OPERATION_SPONSORSHIP_TYPEHASH") =>
        chain.publicClient.readContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName });
      const [, name, version] = await chain.publicClient.readContract({
        address: paymaster,
        abi: eip712Domain,
        functionName: "eip712Domain",
      });
      seen.add(
        JSON.stringify([
          await read("CALL_SPONSORSHIP_TYPEHASH"),
          await read("OPERATION_SPONSORSHIP_TYPEHASH"),
          name,
          version,
        ]),
      );
    }
    assert.equal(seen.size, 1);
    assert.deepEqual(JSON.parse([...seen][0]!).slice(2), ["SponsorPaymaster", "3"]);
  });

  test("an EIP-7702 operation: v0.8 binds keccak256(delegate ‖ initCode[20:]) in either spelling of the marker, pinned", async () => {
    const eoa = randomAccount();
    await delegateEoa(chain, eoa, v08.simple7702Account);
    const op7702 = { ...operation, sender: eoa.address, initCode: "0x7702" as Hex };
    const domain = { chainId: chain.chainId, paymaster: v08.paymaster };
    const expected = operationSponsorshipDigest(
      domain,
      gas,
      { ...op7702, eip7702Delegate: v08.simple7702Account },
      terms,
    );
    assert.equal(await getOperationHash(v08.paymaster, op7702), expected);
    assert.equal(await getOperationHash(v08.paymaster, { ...op7702, initCode: MARKER_PADDED }), expected);
    // With init data after the marker, the data is bound after the delegate.
    const withData = { ...op7702, initCode: concatHex([MARKER_PADDED, "0xc0ffee"]) };
    assert.equal(
      await getOperationHash(v08.paymaster, withData),
      operationSponsorshipDigest(domain, gas, { ...withData, eip7702Delegate: v08.simple7702Account }, terms),
    );
    // The v0.7 build has no such marker: it hashes the bytes as given (an operation v0.7 cannot run).
    assert.equal(
      await getOperationHash(stack.paymaster, op7702),
      operationDigestByHand(chain.chainId, stack.paymaster, gas, op7702, keccak256("0x7702"), terms),
    );
    assert.equal(
      expected,
      operationDigestByHand(
        chain.chainId,
        v08.paymaster,
        gas,
        op7702,
        keccak256(v08.simple7702Account),
        terms,
      ),
    );
    // Pinned for a fixed domain, so a change in the encoding cannot pass unnoticed.
    const fixed = { chainId: 14601, paymaster: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0" as Address };
    assert.equal(
      operationSponsorshipDigest(
        fixed,
        gas,
        { ...op7702, sender: operation.sender, eip7702Delegate: SIMPLE_7702_ACCOUNT_V08_ADDRESS },
        terms,
      ),
      KNOWN_EIP7702_OPERATION_DIGEST,
    );
  });
});

/** An ABI item reduced to what callers depend on (as test/chain/artifacts.test.ts compares them). */
function shape(item: Abi[number]): string {
  const typeOf = (p: AbiParameter): string =>
    p.type.startsWith("tuple") && "components" in p
      ? `(${p.components.map(typeOf).join(",")})${p.type.slice("tuple".length)}`
      : p.type;
  const params = (ps: readonly AbiParameter[] | undefined) =>
    (ps ?? []).map((p) => `${typeOf(p)}${"indexed" in p && p.indexed ? " indexed" : ""}`).join(",");
  const outputs = "outputs" in item ? params(item.outputs) : "";
  const mutability = "stateMutability" in item ? item.stateMutability : "";
  const name = "name" in item ? item.name : "";
  return `${item.type} ${name}(${"inputs" in item ? params(item.inputs) : ""}) ${mutability} -> (${outputs})`;
}

/** The OperationSponsorship digest spelled out with the ABI encoder, initCodeHash given. */
function operationDigestByHand(
  chainId: number,
  paymaster: Address,
  gas: PaymasterGasLimits,
  op: SponsoredOperation,
  initCodeHash: Hex,
  terms: { validUntilSec: number; validAfterSec: number; authId: Hex; senderCodeHash: Hex },
): Hex {
  const domainSeparator = keccak256(
    encodeAbiParameters(
      [
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "bytes32" },
        { type: "uint256" },
        { type: "address" },
      ],
      [
        keccak256(
          toHex("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
        ),
        keccak256(toHex("SponsorPaymaster")),
        keccak256(toHex("3")),
        BigInt(chainId),
        paymaster,
      ],
    ),
  );
  const typeString =
    "OperationSponsorship(address sender,bytes32 senderCodeHash,uint256 nonce,bytes32 initCodeHash,bytes32 callDataHash,bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)";
  const types = [
    "address",
    "bytes32",
    "uint256",
    "bytes32",
    "bytes32",
    "bytes32",
    "uint256",
    "bytes32",
    "uint256",
    "uint256",
    "uint48",
    "uint48",
    "bytes32",
  ];
  const structHash = keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, ...types.map((type) => ({ type }))],
      [
        keccak256(toHex(typeString)),
        op.sender,
        terms.senderCodeHash,
        op.nonce,
        initCodeHash,
        keccak256(op.callData),
        op.accountGasLimits,
        op.preVerificationGas,
        op.gasFees,
        gas.verificationGasLimit,
        gas.postOpGasLimit,
        terms.validUntilSec,
        terms.validAfterSec,
        terms.authId,
      ],
    ),
  );
  return keccak256(concatHex(["0x1901", domainSeparator, structHash]));
}

const KNOWN_EIP7702_OPERATION_DIGEST = "0x935d3244dfb0db1452267da5d62bc530d113555cb871f278d9a4efbaf9f79f5d";

describe("sponsored operations through EntryPoint v0.8", () => {
  const kinds = [
    "SimpleAccount (first operation, deployed by its factory)",
    "Simple7702Account (EIP-7702 authorization in the bundle)",
  ] as const;
  for (const kind of kinds) {
    for (const mode of MODES) {
      test(`${kind}, ${mode} authorization: runs, SponsorshipUsed links it, the deposit falls by exactly actualGasCost`, async () => {
        const is7702 = kind.startsWith("Simple7702");
        const sender7702 = is7702 ? await fresh7702() : null;
        const op = await opFor({ mode, ...(sender7702 ? { eip7702: sender7702.eip7702 } : {}) });
        if (!is7702)
          assert.equal(slice(op.userOp.initCode, 0, 20).toLowerCase(), v08.accountFactory.toLowerCase());
        else assert.equal(op.userOp.initCode, "0x7702");
        const depositBefore = await getDeposit();
        const receipt = await handleOps(chain.publicClient, bundler(), v08.entryPoint, [op.userOp], {
          authorizationList: sender7702 ? [sender7702.authorization] : undefined,
        });
        assert.equal(receipt.status, "success");
        assert.equal(await itemCount(op.sender), 1n);
        if (sender7702) {
          assert.equal(
            await chain.publicClient.getCode({ address: op.sender }),
            delegationCode(v08.simple7702Account).toLowerCase(),
          );
        }

        const { userOps, used } = receiptEvents(receipt.logs);
        assert.equal(userOps.length, 1);
        const event = userOps[0]!.args;
        assert.deepEqual(
          [event.success, event.userOpHash, event.sender, event.paymaster],
          [true, op.userOpHash, op.sender, v08.paymaster],
        );
        assert.equal(userOps[0]!.address, v08.entryPoint.toLowerCase());
        assert.equal(depositBefore - (await getDeposit()), event.actualGasCost);
        assert.equal(used.length, 1);
        assert.equal(used[0]!.address, v08.paymaster.toLowerCase());
        assert.deepEqual(used[0]!.args, { authId: op.authId, userOpHash: op.userOpHash, sender: op.sender });
        assert.equal(await userOpHashOf(op.authId), op.userOpHash);
      });
    }
  }

  test("a delegated EOA's later operation (no marker, initCode empty) and a batch under a whole-operation authorization", async () => {
    const { eip7702, authorization } = await fresh7702();
    const first = await opFor({ mode: "operation", eip7702 });
    await handleOps(chain.publicClient, bundler(), v08.entryPoint, [first.userOp], {
      authorizationList: [authorization],
    });
    // Simple7702Account's executeBatch((address,uint256,bytes)[]): mode 1 does not decode callData.
    const batch = encodeFunctionData({
      abi: parseAbi([
        "struct Call { address target; uint256 value; bytes data; }",
        "function executeBatch(Call[] calls)",
      ]),
      functionName: "executeBatch",
      args: [
        [
          { target: stack.gameItems, value: 0n, data: mintCall },
          { target: stack.gameItems, value: 0n, data: mintCall },
        ],
      ],
    });
    const later = await opFor({
      mode: "operation",
      eip7702: { ...eip7702, initCode: "0x" },
      callData: batch,
    });
    const receipt = await handleOps(chain.publicClient, bundler(), v08.entryPoint, [later.userOp]);
    assert.equal(receiptEvents(receipt.logs).userOps[0]?.args.success, true);
    assert.equal(await itemCount(eip7702.account.address), 3n);
  });
});

describe("refusals on EntryPoint v0.8 (the same as on v0.7)", () => {
  test("call authorization signed by another key, or for another target (AA34)", async () => {
    await assertRefused(await opFor({ signer: randomAccount() }), "AA34 signature error");
    await assertRefused(
      await opFor({ authorization: { target: v08.accountFactory } }),
      "AA34 signature error",
    );
    const { eip7702 } = await fresh7702();
    await delegateEoa(chain, eip7702.account, eip7702.delegate);
    await assertRefused(await opFor({ eip7702, signer: randomAccount() }), "AA34 signature error");
  });

  const bump = (word: Hex, high: bigint, low: bigint) =>
    packUint128Pair(BigInt(slice(word, 0, 16)) + high, BigInt(slice(word, 16, 32)) + low);
  const changes: [string, (op: PackedUserOperation) => PackedUserOperation][] = [
    ["nonce", (op) => ({ ...op, nonce: op.nonce + (1n << 64n) })],
    [
      "callData",
      (op) => ({
        ...op,
        callData: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [43n] }),
      }),
    ],
    ["callGasLimit", (op) => ({ ...op, accountGasLimits: bump(op.accountGasLimits, 0n, 1n) })],
    ["preVerificationGas", (op) => ({ ...op, preVerificationGas: op.preVerificationGas + 1n })],
    ["maxFeePerGas", (op) => ({ ...op, gasFees: bump(op.gasFees, 0n, 1n) })],
  ];
  for (const [field, tamper] of changes) {
    test(`whole-operation authorization: a changed ${field} is refused (AA34), from SimpleAccount and from a delegated EOA`, async () => {
      await assertRefused(await opFor({ mode: "operation", tamper }), "AA34 signature error");
      const { eip7702 } = await fresh7702();
      await delegateEoa(chain, eip7702.account, eip7702.delegate);
      await assertRefused(await opFor({ mode: "operation", eip7702, tamper }), "AA34 signature error");
    });
  }

  test("whole-operation authorization binds the EIP-7702 delegate: a delegation swapped after signing is refused (AA34)", async () => {
    // A second copy of Simple7702Account: same code, so the account still accepts its owner's
    // signature and only the paymaster can tell which implementation the service was shown.
    const other = await deployOtherSimple7702();
    const { eip7702 } = await fresh7702();
    await delegateEoa(chain, eip7702.account, other);
    // The service signed for the canonical implementation; the account signs what the chain hashes.
    const op = await opFor({ mode: "operation", eip7702 });
    const { userOp, userOpHash } = await signUserOp(
      chain.publicClient,
      v08.entryPoint,
      eip7702.account,
      op.userOp,
      {
        scheme: "raw",
      },
    );
    await assertRefused({ ...op, userOp, userOpHash }, "AA34 signature error");
    // Signed for the delegate the chain has, the same operation goes through.
    const honest = await opFor({ mode: "operation", eip7702: { ...eip7702, delegate: other } });
    const receipt = await handleOps(chain.publicClient, bundler(), v08.entryPoint, [honest.userOp]);
    assert.equal(receiptEvents(receipt.logs).userOps[0]?.args.success, true);
  });

  for (const mode of MODES) {
    test(`${mode} authorization: a reused authorization id is refused (AA33 AuthorizationUsed)`, async () => {
      const owner = randomAccount();
      const first = await opFor({ owner, mode });
      await handleOps(chain.publicClient, bundler(), v08.entryPoint, [first.userOp]);
      const second = await opFor({ owner, mode, authorization: { authId: first.authId } });
      const failed = await assertRefused(second, "AA33 reverted", 1n);
      assert.ok(failed.inner);
      const decoded = decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner });
      assert.deepEqual([decoded.errorName, decoded.args], ["AuthorizationUsed", [first.authId]]);
    });

    test(`${mode} authorization: a window that has not started is refused (AA32)`, async () => {
      const nowSec = await latestTimestampSec(chain);
      const op = await opFor({
        mode,
        authorization: { validAfterSec: nowSec + 3_600, validUntilSec: nowSec + 3_900 },
      });
      await assertRefused(op, "AA32 paymaster expired or not due");
    });
  }

  test("malformed paymasterAndData and call-mode callData that is not execute revert (AA33)", async () => {
    const truncated = await opFor({
      tamper: (op) => ({ ...op, paymasterAndData: slice(op.paymasterAndData, 0, 209) }),
    });
    const failed = await assertRefused(truncated, "AA33 reverted");
    assert.equal(
      decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner! }).errorName,
      "MalformedPaymasterData",
    );
    const batch = encodeFunctionData({
      abi: parseAbi([
        "struct Call { address target; uint256 value; bytes data; }",
        "function executeBatch(Call[] calls)",
      ]),
      functionName: "executeBatch",
      args: [[{ target: stack.gameItems, value: 0n, data: mintCall }]],
    });
    const notExecute = await assertRefused(await opFor({ callData: batch }), "AA33 reverted");
    assert.equal(
      decodeErrorResult({ abi: sponsorPaymasterAbi, data: notExecute.inner! }).errorName,
      "NotExecuteCall",
    );
  });
});

describe("paymaster verification gas on EntryPoint v0.8", () => {
  /**
   * The smallest paymasterVerificationGasLimit v0.8 accepts for a first operation, as
   * gas-search.ts measures on v0.7 (eth_call of handleOps, a fresh authorization id per probe).
   * An EIP-7702 sender is shown delegated by a state override, as the bundle would make it.
   */
  async function measure(mode: PaymasterMode, kind: "simple" | "7702"): Promise<bigint> {
    const owner = randomAccount();
    return smallestAccepted(1_000n, 1_000_000n, async (verificationGasLimit) => {
      const paymasterGas = { verificationGasLimit, postOpGasLimit: 0n };
      const eip7702 = kind === "7702" ? { account: owner, delegate: v08.simple7702Account } : undefined;
      const op = await opFor({ mode, paymasterGas, ...(eip7702 ? { eip7702 } : { owner }) });
      const stateOverride = eip7702 ? delegationOverride(owner.address, eip7702.delegate) : undefined;
      const failed = await simulateHandleOps(
        chain.publicClient,
        bundler().account.address,
        v08.entryPoint,
        [op.userOp],
        {
          stateOverride,
        },
      );
      return failed === undefined;
    });
  }

  test("PAYMASTER_GAS_LIMITS covers v0.8's measured verification gas with at least 20% headroom, in both modes and for both accounts", async (t) => {
    for (const mode of MODES) {
      for (const kind of ["simple", "7702"] as const) {
        const measured = await measure(mode, kind);
        t.diagnostic(`v0.8 ${kind} ${mode}: ${measured} gas`);
        assert.ok(
          PAYMASTER_GAS_LIMITS.verificationGasLimit * 100n >= measured * 120n,
          `${kind} ${mode}: measured ${measured}, limit ${PAYMASTER_GAS_LIMITS.verificationGasLimit}`,
        );
      }
    }
  });
});

/** Simple7702Account's release code at another address (a plain CREATE from wallet 0). */
async function deployOtherSimple7702(): Promise<Address> {
  const artifact = accountAbstractionV08Artifact("Simple7702Account");
  const hash = await chain.wallets[0]!.deployContract({ abi: artifact.abi, bytecode: artifact.bytecode });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.ok(receipt.contractAddress);
  return receipt.contractAddress;
}
