/**
 * SponsorPaymaster v2 against the real EntryPoint v0.7 on anvil: what the service signs is what
 * the contract verifies (both modes), an authorized operation runs and is paid from the
 * paymaster's deposit, every way an operation can differ from its authorization is refused, and
 * the authorization ↔ operation link is written during validation, so it survives the
 * EntryPoint's prefund-too-low path whichever way the bundle was submitted.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
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
  zeroAddress,
  zeroHash,
} from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";
import {
  type CallAuthorization,
  callSponsorshipDigest,
  operationSponsorshipDigest,
  type SponsoredOperation,
} from "../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS, type PaymasterGasLimits } from "../../src/paymaster/gas.ts";
import {
  decodePaymasterAndData,
  encodeOperationPaymasterAndData,
  encodePaymasterAndData,
  type PaymasterMode,
  stubPaymasterAndData,
} from "../../src/paymaster/layout.ts";
import { type DevChain, type DevnetStack, deployStack, startChain } from "../support/anvil.ts";
import {
  accountAbstractionArtifact,
  deployAdversarialAccount,
  deployBundleForwarder,
  gameItemsAbi,
  sponsorPaymasterAbi,
} from "../support/chain/devnet.ts";
import { measurePaymasterVerificationGas, prefundTooLowGas } from "../support/gas-search.ts";
import {
  devnetUserOpGas,
  type FailedOp,
  forwardOps,
  handleAggregatedOps,
  handleOps,
  latestTimestampSec,
  packUint128Pair,
  randomAccount,
  requiredPrefundWei,
  type SponsoredOp,
  type SponsoredOpParams,
  simulateHandleOps,
  sponsoredUserOp,
  totalGasLimit,
  type UserOpGas,
} from "../support/userop.ts";

const ITEM_ID = 42n;
const mintCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
const failCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "fail" });
const MODES: PaymasterMode[] = ["call", "operation"];

let chain: DevChain;
let stack: DevnetStack;
let forwarder: Address;
const signer = randomAccount();

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });
  forwarder = await deployBundleForwarder(chain);
});

after(async () => {
  await chain?.stop();
});

const bundler = () => chain.wallets[1]!;

function getDeposit() {
  return chain.publicClient.readContract({
    address: stack.paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "getDeposit",
  });
}

function userOpHashOf(authId: Hex) {
  return chain.publicClient.readContract({
    address: stack.paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "userOpHashOf",
    args: [authId],
  });
}

function itemCount(player: Address) {
  return chain.publicClient.readContract({
    address: stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [player, ITEM_ID],
  });
}

function opFor(overrides: Partial<SponsoredOpParams> = {}): Promise<SponsoredOp> {
  return sponsoredUserOp({
    chain,
    stack,
    owner: overrides.sender ? undefined : randomAccount(),
    signer,
    target: stack.gameItems,
    data: mintCall,
    ...overrides,
  });
}

function receiptEvents(logs: Log[]) {
  return {
    userOps: parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationEvent" }),
    prefundTooLow: parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationPrefundTooLow" }),
    postOpReverts: parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "PostOpRevertReason" }),
    used: parseEventLogs({ abi: sponsorPaymasterAbi, logs, eventName: "SponsorshipUsed" }),
  };
}

/**
 * The operation is refused twice over: the bundler's simulation gets the EntryPoint's FailedOp,
 * and the same handleOps mined with a fixed gas limit reverts. Nothing it asked for happened and
 * its authorization id is still unused (unless the test used it before).
 */
async function assertRefused(op: SponsoredOp, expectedReason: string, minted = 0n): Promise<FailedOp> {
  const usedBefore = await userOpHashOf(op.authId);
  const failed = await simulateHandleOps(chain.publicClient, bundler().account.address, stack.entryPoint, [
    op.userOp,
  ]);
  assert.ok(failed, "the EntryPoint should refuse the operation");
  assert.equal(failed.opIndex, 0n);
  assert.equal(failed.reason, expectedReason);

  const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp], {
    gas: 3_000_000n,
  });
  assert.equal(receipt.status, "reverted");
  assert.equal(await itemCount(op.sender), minted);
  assert.equal(await userOpHashOf(op.authId), usedBefore);
  return failed;
}

function paymasterError(failed: FailedOp) {
  assert.ok(failed.inner, "expected the paymaster's revert data");
  return decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner });
}

/** Replaces paymasterAndData after signing (the account signs what results). */
function withPaymasterAndData(change: (paymasterAndData: Hex) => Hex) {
  return (userOp: PackedUserOperation): PackedUserOperation => ({
    ...userOp,
    paymasterAndData: change(userOp.paymasterAndData),
  });
}

/** Re-encodes paymasterAndData with some of its decoded fields changed (the signature kept). */
function withTerms(change: { validUntilSec?: number; validAfterSec?: number; authId?: Hex }) {
  return withPaymasterAndData((paymasterAndData) => {
    const decoded = decodePaymasterAndData(paymasterAndData);
    assert.ok(decoded);
    return encodePaymasterAndData({ ...decoded, ...change });
  });
}

describe("EIP-712 digests", () => {
  const domain = { chainId: 14601, paymaster: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0" } as const;
  const gas: PaymasterGasLimits = { verificationGasLimit: 70_000n, postOpGasLimit: 0n };
  const call: CallAuthorization = {
    sender: "0x1111111111111111111111111111111111111111",
    senderCodeHash: "0x5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0de5c0d",
    initCode: "0x4444444444444444444444444444444444444444c0ffee",
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
  const operation: SponsoredOperation = {
    sender: "0x1111111111111111111111111111111111111111",
    nonce: 7n,
    initCode: "0x3333333333333333333333333333333333333333deadbeef",
    callData: mintCall,
    accountGasLimits: packUint128Pair(500_000n, 200_000n),
    preVerificationGas: 60_000n,
    gasFees: packUint128Pair(1_000_000_000n, 3_000_000_000n),
  };
  const terms = {
    validUntilSec: call.validUntilSec,
    validAfterSec: call.validAfterSec,
    authId: call.authId,
    senderCodeHash: call.senderCodeHash,
  };

  /** EIP-712 spelled out with the ABI encoder, independent of the hand-written encoding. */
  function digestByHand(chainId: number, paymaster: Address, typeString: string, values: unknown[]): Hex {
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
    const fieldTypes = typeString
      .slice(typeString.indexOf("(") + 1, -1)
      .split(",")
      .map((field) => ({ type: field.split(" ")[0]! }));
    const structHash = keccak256(
      encodeAbiParameters([{ type: "bytes32" }, ...fieldTypes], [keccak256(toHex(typeString)), ...values]),
    );
    return keccak256(concatHex(["0x1901", domainSeparator, structHash]));
  }

  const CALL_TYPE =
    "CallSponsorship(address sender,bytes32 senderCodeHash,bytes32 initCodeHash,address target,bytes4 selector,uint256 maxTotalGas,uint256 maxPreVerificationGas,uint256 maxFeePerGas,uint256 maxPriorityFeePerGas,uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)";
  const OPERATION_TYPE =
    "OperationSponsorship(address sender,bytes32 senderCodeHash,uint256 nonce,bytes32 initCodeHash,bytes32 callDataHash,bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)";

  const callByHand = (chainId: number, paymaster: Address) =>
    digestByHand(chainId, paymaster, CALL_TYPE, [
      call.sender,
      call.senderCodeHash,
      keccak256(call.initCode),
      call.target,
      call.selector,
      call.maxTotalGas,
      call.maxPreVerificationGas,
      call.maxFeePerGasWei,
      call.maxPriorityFeePerGasWei,
      gas.verificationGasLimit,
      gas.postOpGasLimit,
      call.validUntilSec,
      call.validAfterSec,
      call.authId,
    ]);
  const operationByHand = (chainId: number, paymaster: Address) =>
    digestByHand(chainId, paymaster, OPERATION_TYPE, [
      operation.sender,
      terms.senderCodeHash,
      operation.nonce,
      keccak256(operation.initCode),
      keccak256(operation.callData),
      operation.accountGasLimits,
      operation.preVerificationGas,
      operation.gasFees,
      gas.verificationGasLimit,
      gas.postOpGasLimit,
      terms.validUntilSec,
      terms.validAfterSec,
      terms.authId,
    ]);

  test("callSponsorshipDigest matches a pinned known answer and a hand-rolled EIP-712 encoding", () => {
    const digest = callSponsorshipDigest(domain, gas, call);
    assert.equal(digest, KNOWN_CALL_DIGEST);
    assert.equal(digest, callByHand(domain.chainId, domain.paymaster));
  });

  test("operationSponsorshipDigest matches a pinned known answer and a hand-rolled EIP-712 encoding", () => {
    const digest = operationSponsorshipDigest(domain, gas, operation, terms);
    assert.equal(digest, KNOWN_OPERATION_DIGEST);
    assert.equal(digest, operationByHand(domain.chainId, domain.paymaster));
  });

  test("the contract's getCallHash equals the service's callSponsorshipDigest", async () => {
    const onChain = await chain.publicClient.readContract({
      address: stack.paymaster,
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
    const onChainDomain = { chainId: chain.chainId, paymaster: stack.paymaster };
    assert.equal(onChain, callSponsorshipDigest(onChainDomain, gas, call));
    assert.equal(onChain, callByHand(chain.chainId, stack.paymaster));
  });

  test("the contract's getOperationHash equals the service's operationSponsorshipDigest", async () => {
    // The view reads the paymaster's gas limits from paymasterAndData and ignores the rest of it.
    const paymasterAndData = encodeOperationPaymasterAndData(
      { chainId: chain.chainId, paymaster: stack.paymaster },
      gas,
      { validUntilSec: 1, validAfterSec: 0, authId: zeroHash, senderCodeHash: zeroHash },
      `0x${"99".repeat(65)}`,
    );
    const onChain = await chain.publicClient.readContract({
      address: stack.paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "getOperationHash",
      args: [
        { ...operation, paymasterAndData, signature: "0x1234" },
        terms.senderCodeHash,
        terms.validUntilSec,
        terms.validAfterSec,
        terms.authId,
      ],
    });
    const onChainDomain = { chainId: chain.chainId, paymaster: stack.paymaster };
    assert.equal(onChain, operationSponsorshipDigest(onChainDomain, gas, operation, terms));
    assert.equal(onChain, operationByHand(chain.chainId, stack.paymaster));
  });

  test("the contract's type hashes are the keccak of the type strings the service signs", async () => {
    const read = (functionName: "CALL_SPONSORSHIP_TYPEHASH" | "OPERATION_SPONSORSHIP_TYPEHASH") =>
      chain.publicClient.readContract({ address: stack.paymaster, abi: sponsorPaymasterAbi, functionName });
    assert.equal(await read("CALL_SPONSORSHIP_TYPEHASH"), keccak256(toHex(CALL_TYPE)));
    assert.equal(await read("OPERATION_SPONSORSHIP_TYPEHASH"), keccak256(toHex(OPERATION_TYPE)));
  });

  test("the contract advertises EIP-712 domain version 3 (ERC-5267)", async () => {
    const [, name, version, chainId, verifyingContract] = await chain.publicClient.readContract({
      address: stack.paymaster,
      abi: parseAbi([
        "function eip712Domain() view returns (bytes1, string, string, uint256, address, bytes32, uint256[])",
      ]),
      functionName: "eip712Domain",
    });
    assert.deepEqual(
      [name, version, chainId, verifyingContract],
      ["SponsorPaymaster", "3", 14601n, stack.paymaster],
    );
  });
});

/** Pinned once from the hand-rolled encoding; a change here means signatures stop verifying. */
const KNOWN_CALL_DIGEST = "0x371caa63151cac6a3140f1f2e8fcee65432158fc75f4a5596db06f0123578c22";
const KNOWN_OPERATION_DIGEST = "0x55f29c0f240cc88c6a3fe70e5717b953f0eff92f8b4c63d69fa36d01c6bdd213";

describe("paymaster gas limits", () => {
  test("PAYMASTER_GAS_LIMITS covers the verification gas both modes measure, with at least 20% headroom, and no postOp", async () => {
    assert.equal(PAYMASTER_GAS_LIMITS.postOpGasLimit, 0n);
    for (const mode of MODES) {
      // A first operation (the account is deployed by initCode) is the larger case.
      const measured = await measurePaymasterVerificationGas({
        chain,
        stack,
        signer,
        owner: randomAccount(),
        target: stack.gameItems,
        data: mintCall,
        mode,
      });
      assert.ok(
        PAYMASTER_GAS_LIMITS.verificationGasLimit * 100n >= measured * 120n,
        `${mode}: measured ${measured}, limit ${PAYMASTER_GAS_LIMITS.verificationGasLimit}`,
      );
    }
  });
});

describe("sponsored operations", () => {
  test("deploy stack puts EntryPoint v0.7 at its canonical address through CREATE2", () => {
    assert.equal(stack.entryPoint, "0x0000000071727De22E5E9d8BAf0edAc6f37da032");
    assert.equal(stack.entryPointDeployment, "create2");
  });

  for (const mode of MODES) {
    test(`${mode} authorization: the operation runs, SponsorshipUsed links it, the deposit falls by exactly actualGasCost`, async () => {
      const op = await opFor({ mode });
      const depositBefore = await getDeposit();
      const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
      assert.equal(receipt.status, "success");
      assert.equal(await itemCount(op.sender), 1n);

      const { userOps, used, postOpReverts } = receiptEvents(receipt.logs);
      assert.equal(userOps.length, 1);
      const event = userOps[0]!.args;
      assert.deepEqual(
        [event.success, event.userOpHash, event.sender, event.paymaster],
        [true, op.userOpHash, op.sender, stack.paymaster],
      );
      assert.ok(event.actualGasCost <= requiredPrefundWei(gasOf(op.userOp), PAYMASTER_GAS_LIMITS));
      assert.equal(depositBefore - (await getDeposit()), event.actualGasCost);

      assert.equal(used.length, 1);
      assert.equal(used[0]!.address, stack.paymaster.toLowerCase());
      assert.deepEqual(used[0]!.args, { authId: op.authId, userOpHash: op.userOpHash, sender: op.sender });
      assert.equal(await userOpHashOf(op.authId), op.userOpHash);
      assert.equal(postOpReverts.length, 0);
    });
  }

  test("an operation whose game call reverts is still paid and still linked by SponsorshipUsed", async () => {
    const op = await opFor({ data: failCall });
    const depositBefore = await getDeposit();
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
    assert.equal(receipt.status, "success");

    const { userOps, used } = receiptEvents(receipt.logs);
    assert.equal(userOps.length, 1);
    assert.equal(userOps[0]!.args.success, false);
    const revertLogs = parseEventLogs({
      abi: entryPoint07Abi,
      logs: receipt.logs,
      eventName: "UserOperationRevertReason",
    });
    assert.equal(
      decodeErrorResult({ abi: gameItemsAbi, data: revertLogs[0]!.args.revertReason }).errorName,
      "AlwaysFails",
    );
    assert.equal(depositBefore - (await getDeposit()), userOps[0]!.args.actualGasCost);
    assert.deepEqual(used[0]?.args, { authId: op.authId, userOpHash: op.userOpHash, sender: op.sender });
  });

  test("a whole-operation authorization does not require SimpleAccount.execute (the service decoded the calls)", async () => {
    const owner = randomAccount();
    const batch = encodeFunctionData({
      abi: parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]),
      functionName: "executeBatch",
      args: [[stack.gameItems, stack.gameItems], [], [mintCall, mintCall]],
    });
    const op = await opFor({ owner, mode: "operation", callData: batch });
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
    assert.equal(receiptEvents(receipt.logs).userOps[0]?.args.success, true);
    assert.equal(await itemCount(op.sender), 2n);
  });
});

/** The account gas fields of a packed operation, unpacked. */
function gasOf(userOp: PackedUserOperation): UserOpGas {
  const high = (word: Hex) => BigInt(slice(word, 0, 16));
  const low = (word: Hex) => BigInt(slice(word, 16, 32));
  return {
    verificationGasLimit: high(userOp.accountGasLimits),
    callGasLimit: low(userOp.accountGasLimits),
    preVerificationGas: userOp.preVerificationGas,
    maxPriorityFeePerGas: high(userOp.gasFees),
    maxFeePerGas: low(userOp.gasFees),
  };
}

describe("refused call authorizations", () => {
  test("refuses an authorization signed by another key (AA34)", async () => {
    await assertRefused(await opFor({ signer: randomAccount() }), "AA34 signature error");
  });

  test("refuses an authorization signed for another chain id (AA34)", async () => {
    await assertRefused(await opFor({ domain: { chainId: 1 } }), "AA34 signature error");
  });

  test("refuses an authorization signed for another sender (AA34)", async () => {
    const other = await opFor();
    await assertRefused(await opFor({ authorization: { sender: other.sender } }), "AA34 signature error");
  });

  test("refuses an authorization signed for another target contract (AA34)", async () => {
    await assertRefused(
      await opFor({ authorization: { target: stack.accountFactory } }),
      "AA34 signature error",
    );
  });

  test("refuses an authorization signed for another function selector (AA34)", async () => {
    const op = await opFor({ authorization: { selector: slice(failCall, 0, 4) } });
    await assertRefused(op, "AA34 signature error");
  });

  // The happy path signs ceilings equal to the operation's own values, so each of these is the
  // operation exceeding one ceiling by exactly 1.
  test("refuses an operation whose total gas exceeds maxTotalGas by 1 (AA34, not a revert)", async () => {
    const maxTotalGas = totalGasLimit(devnetUserOpGas, PAYMASTER_GAS_LIMITS) - 1n;
    await assertRefused(await opFor({ authorization: { maxTotalGas } }), "AA34 signature error");
  });

  test("refuses an operation whose maxFeePerGas exceeds its ceiling by 1 (AA34)", async () => {
    const op = await opFor({ authorization: { maxFeePerGasWei: devnetUserOpGas.maxFeePerGas - 1n } });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an operation whose maxPriorityFeePerGas exceeds its ceiling by 1 (AA34)", async () => {
    const op = await opFor({
      authorization: { maxPriorityFeePerGasWei: devnetUserOpGas.maxPriorityFeePerGas - 1n },
    });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an operation whose preVerificationGas exceeds maxPreVerificationGas by 1 (AA34)", async () => {
    const op = await opFor({
      authorization: { maxPreVerificationGas: devnetUserOpGas.preVerificationGas - 1n },
    });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an initCode other than the one signed, and an initCode where none was signed (AA34)", async () => {
    // The first operation deploys the account; the authorization signs another factory call.
    const other = concatHex([stack.accountFactory, "0xc0ffee"]);
    await assertRefused(await opFor({ authorization: { initCode: other } }), "AA34 signature error");
    await assertRefused(await opFor({ authorization: { initCode: "0x" } }), "AA34 signature error");
  });

  for (const mode of MODES) {
    test(`${mode} authorization: refuses paymaster gas limits other than the signed ones (AA34)`, async () => {
      const more = {
        ...PAYMASTER_GAS_LIMITS,
        verificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit + 1n,
      };
      await assertRefused(
        await opFor({ mode, paymasterGas: more, signedPaymasterGas: PAYMASTER_GAS_LIMITS }),
        "AA34 signature error",
      );
      const withPostOp = { ...PAYMASTER_GAS_LIMITS, postOpGasLimit: 1n };
      await assertRefused(
        await opFor({ mode, paymasterGas: withPostOp, signedPaymasterGas: PAYMASTER_GAS_LIMITS }),
        "AA34 signature error",
      );
    });

    test(`${mode} authorization: refuses a second operation that reuses an authorization id (AA33 AuthorizationUsed)`, async () => {
      const owner = randomAccount();
      const first = await opFor({ owner, mode });
      await handleOps(chain.publicClient, bundler(), stack.entryPoint, [first.userOp]);
      assert.equal(await userOpHashOf(first.authId), first.userOpHash);

      const second = await opFor({ owner, mode, authorization: { authId: first.authId } });
      const failed = await assertRefused(second, "AA33 reverted", 1n);
      const decoded = paymasterError(failed);
      assert.equal(decoded.errorName, "AuthorizationUsed");
      assert.deepEqual(decoded.args, [first.authId]);
      // The link still names the first operation.
      assert.equal(await userOpHashOf(first.authId), first.userOpHash);
    });

    test(`${mode} authorization: refuses a window that has not started (AA32)`, async () => {
      const nowSec = await latestTimestampSec(chain);
      const op = await opFor({
        mode,
        authorization: { validAfterSec: nowSec + 3_600, validUntilSec: nowSec + 3_900 },
      });
      await assertRefused(op, "AA32 paymaster expired or not due");
    });
  }

  test("refuses an authorization whose window has ended, in both modes (AA32)", async () => {
    const ops = [await opFor({ mode: "call" }), await opFor({ mode: "operation" })];
    await chain.testClient.increaseTime({ seconds: 301 });
    await chain.testClient.mine({ blocks: 1 });
    for (const op of ops) {
      assert.ok((await latestTimestampSec(chain)) > (op.paymasterData?.validUntilSec ?? 0));
      await assertRefused(op, "AA32 paymaster expired or not due");
    }
  });
});

describe("malformed paymasterAndData or callData reverts (AA33)", () => {
  /** paymasterAndData with bytes [start, end) replaced by `replacement`. */
  const splice = (hex: Hex, start: number, end: number, replacement: Hex = "0x"): Hex =>
    concatHex([slice(hex, 0, start), replacement, slice(hex, end)]);

  const cases: [string, SponsoredOpParams["tamper"], string, (op: SponsoredOp) => unknown[]][] = [
    [
      "truncated by one byte",
      withPaymasterAndData((d) => slice(d, 0, 257)),
      "MalformedPaymasterData",
      () => [257n],
    ],
    [
      "one byte too long",
      withPaymasterAndData((d) => concatHex([d, "0x00"])),
      "MalformedPaymasterData",
      () => [259n],
    ],
    [
      "only the EntryPoint's 52 bytes",
      withPaymasterAndData((d) => slice(d, 0, 52)),
      "MalformedPaymasterData",
      () => [52n],
    ],
    [
      "an unknown mode",
      withPaymasterAndData((d) => splice(d, 52, 53, "0x02")),
      "MalformedPaymasterData",
      () => [258n],
    ],
    [
      "a call payload labelled as a whole-operation one",
      withPaymasterAndData((d) => splice(d, 52, 53, "0x01")),
      "MalformedPaymasterData",
      () => [258n],
    ],
    [
      "an empty window (validUntil = validAfter)",
      withPaymasterAndData((d) => splice(d, 53, 59, slice(d, 59, 65))),
      "InvalidWindow",
      (op) => [op.authorization?.validAfterSec, op.authorization?.validAfterSec],
    ],
  ];
  for (const [name, tamper, errorName, args] of cases) {
    test(`refuses ${name}: ${errorName}`, async () => {
      const op = await opFor({ tamper });
      const decoded = paymasterError(await assertRefused(op, "AA33 reverted"));
      assert.equal(decoded.errorName, errorName);
      assert.deepEqual(decoded.args, args(op));
    });
  }

  test("refuses a whole-operation payload with a call payload's length (194-byte mode relabelled)", async () => {
    const op = await opFor({
      mode: "operation",
      tamper: withPaymasterAndData((d) => splice(d, 52, 53, "0x00")),
    });
    const decoded = paymasterError(await assertRefused(op, "AA33 reverted"));
    assert.deepEqual([decoded.errorName, decoded.args], ["MalformedPaymasterData", [194n]]);
  });

  test("refuses call-mode callData that is not SimpleAccount.execute: NotExecuteCall", async () => {
    const batch = encodeFunctionData({
      abi: parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]),
      functionName: "executeBatch",
      args: [[stack.gameItems], [], [mintCall]],
    });
    const op = await opFor({ callData: batch });
    assert.equal(paymasterError(await assertRefused(op, "AA33 reverted")).errorName, "NotExecuteCall");
  });

  test("refuses an inner call shorter than a selector: MissingSelector", async () => {
    const op = await opFor({ data: "0xa0712d", authorization: { selector: "0xa0712d00" } });
    assert.equal(paymasterError(await assertRefused(op, "AA33 reverted")).errorName, "MissingSelector");
  });

  test("refuses execute callData whose dest has high bits or whose func points outside: MalformedCallData", async () => {
    const execute = encodeFunctionData({
      abi: parseAbi(["function execute(address dest, uint256 value, bytes func)"]),
      functionName: "execute",
      args: [stack.gameItems, 0n, mintCall],
    });
    const dirtyDest = splice(execute, 4, 5, "0x01");
    const farOffset = splice(execute, 68, 100, toHex(10_000n, { size: 32 }));
    for (const callData of [dirtyDest, farOffset]) {
      const op = await opFor({ callData });
      assert.equal(paymasterError(await assertRefused(op, "AA33 reverted")).errorName, "MalformedCallData");
    }
  });
});

describe("the sender's code is bound: EXTCODEHASH(sender) must be the signed senderCodeHash", () => {
  for (const mode of MODES) {
    test(`${mode} authorization: the verified code hash runs; any other hash is refused (AA34); zero binds nothing`, async () => {
      const owner = randomAccount();
      // The first operation deploys the account (its code hash unbound: its initCode is signed).
      const first = await opFor({ owner, mode });
      await handleOps(chain.publicClient, bundler(), stack.entryPoint, [first.userOp]);
      const code = await chain.publicClient.getCode({ address: first.sender });
      assert.ok(code && code !== "0x");
      const codeHash = keccak256(code);

      const wrong = await opFor({ owner, mode, authorization: { senderCodeHash: keccak256("0x00") } });
      await assertRefused(wrong, "AA34 signature error", 1n);

      const bound = await opFor({ owner, mode, authorization: { senderCodeHash: codeHash } });
      const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [bound.userOp]);
      assert.equal(receiptEvents(receipt.logs).userOps[0]?.args.success, true);
      assert.equal(await itemCount(bound.sender), 2n);
    });
  }
});

describe("refused whole-operation authorizations: any field changed after signing (AA34)", () => {
  const bump = (word: Hex, high: bigint, low: bigint) =>
    packUint128Pair(BigInt(slice(word, 0, 16)) + high, BigInt(slice(word, 16, 32)) + low);
  const changes: [string, (op: PackedUserOperation) => PackedUserOperation][] = [
    [
      "nonce (another nonce key, valid for the EntryPoint)",
      (op) => ({ ...op, nonce: op.nonce + (1n << 64n) }),
    ],
    [
      "callData",
      (op) => ({
        ...op,
        callData: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [43n] }),
      }),
    ],
    ["verificationGasLimit", (op) => ({ ...op, accountGasLimits: bump(op.accountGasLimits, 1n, 0n) })],
    ["callGasLimit", (op) => ({ ...op, accountGasLimits: bump(op.accountGasLimits, 0n, 1n) })],
    ["preVerificationGas", (op) => ({ ...op, preVerificationGas: op.preVerificationGas + 1n })],
    ["maxPriorityFeePerGas", (op) => ({ ...op, gasFees: bump(op.gasFees, 1n, 0n) })],
    ["maxFeePerGas", (op) => ({ ...op, gasFees: bump(op.gasFees, 0n, 1n) })],
    ["validUntil", withTerms({ validUntilSec: 4_000_000_000 })],
    ["validAfter", withTerms({ validAfterSec: 1 })],
    ["authId", withTerms({ authId: keccak256("0x01") })],
  ];
  for (const [field, tamper] of changes) {
    test(`refuses a changed ${field}`, async () => {
      const owner = randomAccount();
      await assertRefused(await opFor({ owner, mode: "operation", tamper }), "AA34 signature error");
    });
  }

  test("refuses a changed initCode (same account deployed by different bytes)", async () => {
    // ABI decoding ignores trailing bytes, so the factory still creates the very same sender.
    const tamper = (op: PackedUserOperation) => ({ ...op, initCode: concatHex([op.initCode, "0x00"]) });
    const op = await opFor({ mode: "operation", tamper });
    assert.notEqual(op.userOp.initCode, "0x");
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses a changed sender", async () => {
    // Two accounts that accept any signature: only the paymaster can tell them apart.
    const [a, b] = [await deployAdversarialAccount(chain), await deployAdversarialAccount(chain)];
    const op = await opFor({ sender: a, mode: "operation", tamper: (userOp) => ({ ...userOp, sender: b }) });
    await assertRefused({ ...op, sender: b }, "AA34 signature error");
  });

  test("refuses an authorization signed by another key or for another chain", async () => {
    await assertRefused(await opFor({ mode: "operation", signer: randomAccount() }), "AA34 signature error");
    await assertRefused(await opFor({ mode: "operation", domain: { chainId: 1 } }), "AA34 signature error");
  });
});

describe("gas estimation with a stub", () => {
  const validationResultAbi = accountAbstractionArtifact("EntryPointSimulations");

  for (const mode of MODES) {
    test(`${mode} stub with generous limits: simulateValidation reports a signature failure, not a revert`, async () => {
      const nowSec = await latestTimestampSec(chain);
      const stub = stubPaymasterAndData({
        paymaster: stack.paymaster,
        mode,
        gas: PAYMASTER_GAS_LIMITS,
        validAfterSec: nowSec - 60,
        validUntilSec: nowSec + 300,
      });
      const generous: UserOpGas = {
        ...devnetUserOpGas,
        verificationGasLimit: 3_000_000n,
        callGasLimit: 3_000_000n,
        preVerificationGas: 1_000_000n,
      };
      const op = await opFor({ mode, gas: generous, tamper: withPaymasterAndData(() => stub) });

      // As a bundler estimates: EntryPointSimulations' code in place of the EntryPoint's, by state override.
      const { result } = await chain.publicClient.simulateContract({
        address: stack.entryPoint,
        abi: validationResultAbi.abi,
        functionName: "simulateValidation",
        args: [op.userOp],
        stateOverride: [{ address: stack.entryPoint, code: validationResultAbi.deployedBytecode }],
      });
      const { returnInfo } = result as {
        returnInfo: { paymasterValidationData: bigint; paymasterContext: Hex };
      };
      const validationData = returnInfo.paymasterValidationData;
      assert.equal(validationData & ((1n << 160n) - 1n), 1n, "sigFailed");
      assert.equal(Number((validationData >> 160n) & 0xffffffffffffn), nowSec + 300);
      assert.equal(Number(validationData >> 208n), nowSec - 60);
      assert.equal(returnInfo.paymasterContext, "0x");

      // Simulated handleOps therefore says AA34 (a bundler discards the stub's signature), never AA33.
      const failed = await simulateHandleOps(
        chain.publicClient,
        bundler().account.address,
        stack.entryPoint,
        [op.userOp],
      );
      assert.equal(failed?.reason, "AA34 signature error");
    });
  }
});

describe("prefund-too-low path: an AdversarialAccount ending in 2 KB of revert data", () => {
  let sender: Address;
  let tightGas: UserOpGas;

  before(async () => {
    sender = await deployAdversarialAccount(chain, 2_048n);
    // One operation first, so the account's nonce slot is non-zero: every later operation then
    // pays the same warm-ish nonce update, and the limits found below are tight for all of them.
    const warmUp = await opFor({ sender });
    await handleOps(chain.publicClient, bundler(), stack.entryPoint, [warmUp.userOp]);
    // Equal fees: the EntryPoint then charges exactly maxFeePerGas, the price of the prefund.
    const fees = { maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 2_000_000_000n };
    tightGas = await prefundTooLowGas({
      chain,
      stack,
      signer,
      sender,
      target: stack.gameItems,
      data: mintCall,
      gas: { ...devnetUserOpGas, ...fees, preVerificationGas: 21_000n },
    });
  });

  const routes: [string, (ops: PackedUserOperation[]) => ReturnType<typeof handleOps>, () => Address][] = [
    [
      "handleOps",
      (ops) => handleOps(chain.publicClient, bundler(), stack.entryPoint, ops),
      () => stack.entryPoint,
    ],
    [
      "handleAggregatedOps with aggregator 0",
      (ops) => handleAggregatedOps(chain.publicClient, bundler(), stack.entryPoint, ops),
      () => stack.entryPoint,
    ],
    [
      "a BundleForwarder calling handleOps",
      (ops) => forwardOps(chain.publicClient, bundler(), forwarder, stack.entryPoint, ops),
      () => forwarder,
    ],
    [
      "a BundleForwarder calling handleAggregatedOps",
      (ops) =>
        forwardOps(chain.publicClient, bundler(), forwarder, stack.entryPoint, ops, { aggregated: true }),
      () => forwarder,
    ],
  ];
  for (const [route, submit, to] of routes) {
    test(`through ${route}: SponsorshipUsed links authId and userOpHash, and the deposit falls by actualGasCost`, async () => {
      const op = await opFor({ sender, gas: tightGas });
      const depositBefore = await getDeposit();
      const receipt = await submit([op.userOp]);
      assert.equal(receipt.status, "success");
      assert.equal(receipt.to?.toLowerCase(), to().toLowerCase());

      const { userOps, prefundTooLow, used } = receiptEvents(receipt.logs);
      assert.equal(prefundTooLow.length, 1, "the EntryPoint took its prefund-too-low path");
      assert.equal(prefundTooLow[0]!.args.userOpHash, op.userOpHash);
      assert.equal(userOps.length, 1);
      const event = userOps[0]!.args;
      assert.deepEqual(
        [event.userOpHash, event.sender, event.paymaster, event.success],
        [op.userOpHash, sender, stack.paymaster, false],
      );
      // On this path the charge is the whole prefund, and nothing is refunded to the deposit.
      assert.equal(event.actualGasCost, requiredPrefundWei(tightGas, PAYMASTER_GAS_LIMITS));
      assert.equal(depositBefore - (await getDeposit()), event.actualGasCost);

      assert.equal(used.length, 1);
      assert.deepEqual(used[0]!.args, { authId: op.authId, userOpHash: op.userOpHash, sender });
      assert.equal(await userOpHashOf(op.authId), op.userOpHash);
    });
  }
});

describe("signer rotation", () => {
  test("only the owner rotates the signer, and the old key stops working at once", async () => {
    const next = randomAccount();
    await assert.rejects(
      chain.wallets[2]!.writeContract({
        address: stack.paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "setSigner",
        args: [next.address],
      }),
      /OwnableUnauthorizedAccount|reverted/,
    );
    const owner = chain.wallets[0]!;
    await assert.rejects(
      chain.publicClient.simulateContract({
        account: owner.account,
        address: stack.paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "setSigner",
        args: [zeroAddress],
      }),
      /ZeroSigner/,
    );
    const hash = await owner.writeContract({
      address: stack.paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "setSigner",
      args: [next.address],
    });
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
    const [changed] = parseEventLogs({
      abi: sponsorPaymasterAbi,
      logs: receipt.logs,
      eventName: "SignerChanged",
    });
    assert.deepEqual(changed?.args, { previousSigner: signer.address, newSigner: next.address });

    await assertRefused(await opFor(), "AA34 signature error");
    const ok = await opFor({ signer: next });
    const done = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [ok.userOp]);
    assert.equal(receiptEvents(done.logs).userOps[0]?.args.success, true);
  });
});
