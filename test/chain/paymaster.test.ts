/**
 * SponsorPaymaster against the real EntryPoint v0.7 on anvil: what the service signs is what
 * the contract verifies, an authorized operation runs and is paid from the paymaster's deposit,
 * and every way an operation can differ from its authorization is refused on chain.
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
  hashTypedData,
  keccak256,
  parseAbi,
  parseEventLogs,
  slice,
  toFunctionSelector,
  toHex,
  zeroAddress,
} from "viem";
import { entryPoint07Abi } from "viem/account-abstraction";
import { sponsorshipDigest, sponsorshipTypedData } from "../../src/sponsor/paymaster-data.ts";
import { type DevChain, type DevnetStack, deployStack, startChain } from "../support/anvil.ts";
import { gameItemsAbi, SPONSOR_PAYMASTER_GAS_LIMITS, sponsorPaymasterAbi } from "../support/chain/devnet.ts";
import {
  type FailedOp,
  handleOps,
  latestTimestampSec,
  randomAccount,
  type SponsoredOp,
  type SponsoredOpParams,
  signUserOp,
  simulateHandleOps,
  sponsoredUserOp,
} from "../support/userop.ts";

const ITEM_ID = 42n;
const mintCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [ITEM_ID] });
const failCall = encodeFunctionData({ abi: gameItemsAbi, functionName: "fail" });

let chain: DevChain;
let stack: DevnetStack;
const signer = randomAccount();

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });
});

after(async () => {
  await chain?.stop();
});

const bundler = () => chain.wallets[1]!;

function read<F extends "getDeposit" | "signer">(functionName: F) {
  return chain.publicClient.readContract({
    address: stack.paymaster,
    abi: sponsorPaymasterAbi,
    functionName,
  });
}

function isAuthIdUsed(authId: Hex) {
  return chain.publicClient.readContract({
    address: stack.paymaster,
    abi: sponsorPaymasterAbi,
    functionName: "usedAuthIds",
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
    owner: randomAccount(),
    signer,
    target: stack.gameItems,
    data: mintCall,
    ...overrides,
  });
}

function receiptEvents(logs: Parameters<typeof parseEventLogs>[0]["logs"]) {
  return {
    userOps: parseEventLogs({ abi: entryPoint07Abi, logs, eventName: "UserOperationEvent" }),
    sponsored: parseEventLogs({ abi: sponsorPaymasterAbi, logs, eventName: "Sponsored" }),
  };
}

/**
 * The operation is refused twice over: the bundler's simulation gets the EntryPoint's FailedOp,
 * and the same handleOps mined with a fixed gas limit reverts. Nothing it asked for happened.
 */
async function assertRefused(
  op: SponsoredOp,
  expectedReason: string,
  before: { minted: bigint; authIdUsed: boolean } = { minted: 0n, authIdUsed: false },
): Promise<FailedOp> {
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
  assert.equal(await itemCount(op.sender), before.minted);
  assert.equal(await isAuthIdUsed(op.sponsorship.authId), before.authIdUsed);
  return failed;
}

function paymasterError(failed: FailedOp) {
  assert.ok(failed.inner, "expected the paymaster's revert data");
  return decodeErrorResult({ abi: sponsorPaymasterAbi, data: failed.inner });
}

describe("EIP-712 digest", () => {
  const fixed = {
    sender: "0x1111111111111111111111111111111111111111",
    target: "0x2222222222222222222222222222222222222222",
    selector: toFunctionSelector("mint(uint256)"),
    maxGasCostWei: 3_100_000_000_000_000n,
    validUntilSec: 1_800_000_300,
    validAfterSec: 1_800_000_000,
    authId: "0x6a1c5b3ef2d04c0f9e8b7a6d5c4b3a2918f7e6d5c4b3a29180f7e6d5c4b3a291",
  } as const;

  /** EIP-712 spelled out by hand, independent of viem's typed-data encoder. */
  function digestByHand(chainId: number, paymaster: Address): Hex {
    const domainTypeHash = keccak256(
      toHex("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
    );
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
          domainTypeHash,
          keccak256(toHex("SponsorPaymaster")),
          keccak256(toHex("1")),
          BigInt(chainId),
          paymaster,
        ],
      ),
    );
    const typeHash = keccak256(
      toHex(
        "Sponsorship(address sender,address target,bytes4 selector,uint256 maxGasCost,uint48 validUntil,uint48 validAfter,bytes32 authId)",
      ),
    );
    const structHash = keccak256(
      encodeAbiParameters(
        ["bytes32", "address", "address", "bytes4", "uint256", "uint48", "uint48", "bytes32"].map((type) => ({
          type,
        })),
        [
          typeHash,
          fixed.sender,
          fixed.target,
          fixed.selector,
          fixed.maxGasCostWei,
          fixed.validUntilSec,
          fixed.validAfterSec,
          fixed.authId,
        ],
      ),
    );
    return keccak256(concatHex(["0x1901", domainSeparator, structHash]));
  }

  test("sponsorshipDigest matches a pinned known answer and a hand-rolled EIP-712 encoding", () => {
    const domain = { chainId: 14601, paymaster: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0" } as const;
    const digest = sponsorshipDigest(domain, fixed);
    assert.equal(digest, "0xf765d31a890a6da1b8ed6b2d3ea3796f05f7754d4b3299a4d465327ea675dbd6");
    assert.equal(digest, digestByHand(domain.chainId, domain.paymaster));
    assert.equal(digest, hashTypedData(sponsorshipTypedData(domain, fixed)));
  });

  test("the contract's getHash equals the service's sponsorshipDigest", async () => {
    const onChain = await chain.publicClient.readContract({
      address: stack.paymaster,
      abi: sponsorPaymasterAbi,
      functionName: "getHash",
      args: [
        fixed.sender,
        fixed.target,
        fixed.selector,
        fixed.maxGasCostWei,
        fixed.validUntilSec,
        fixed.validAfterSec,
        fixed.authId,
      ],
    });
    const domain = { chainId: chain.chainId, paymaster: stack.paymaster };
    assert.equal(onChain, sponsorshipDigest(domain, fixed));
    assert.equal(onChain, digestByHand(chain.chainId, stack.paymaster));
  });

  test("the contract advertises the same EIP-712 domain (ERC-5267)", async () => {
    const [, name, version, chainId, verifyingContract] = await chain.publicClient.readContract({
      address: stack.paymaster,
      abi: parseAbi([
        "function eip712Domain() view returns (bytes1, string, string, uint256, address, bytes32, uint256[])",
      ]),
      functionName: "eip712Domain",
    });
    assert.deepEqual(
      [name, version, chainId, verifyingContract],
      ["SponsorPaymaster", "1", 14601n, stack.paymaster],
    );
  });
});

describe("authorized operations", () => {
  test("deploy stack puts EntryPoint v0.7 at its canonical address through CREATE2", () => {
    assert.equal(stack.entryPoint, "0x0000000071727De22E5E9d8BAf0edAc6f37da032");
    assert.equal(stack.entryPointDeployment, "create2");
  });

  test("an authorized operation runs, is paid from the paymaster deposit and emits Sponsored", async () => {
    const op = await opFor();
    const depositBefore = await read("getDeposit");
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
    assert.equal(receipt.status, "success");
    assert.equal(await itemCount(op.sender), 1n);

    const { userOps, sponsored } = receiptEvents(receipt.logs);
    assert.equal(userOps.length, 1);
    const event = userOps[0]!.args;
    assert.equal(event.success, true);
    assert.equal(event.userOpHash, op.userOpHash);
    assert.equal(event.sender, op.sender);
    assert.equal(event.paymaster, stack.paymaster);
    assert.ok(event.actualGasCost <= op.sponsorship.maxGasCostWei, "charged more than authorized");
    assert.equal(depositBefore - (await read("getDeposit")), event.actualGasCost);

    assert.equal(sponsored.length, 1);
    const { authId, userOpHash, sender, actualGasCost } = sponsored[0]!.args;
    assert.deepEqual([authId, userOpHash, sender], [op.sponsorship.authId, op.userOpHash, op.sender]);
    // postOp only sees the cost so far: the EntryPoint adds postOp's own gas and the 10% penalty
    // on unused execution gas afterwards. Settlement must use UserOperationEvent.actualGasCost.
    assert.ok(actualGasCost > 0n);
    assert.ok(actualGasCost < event.actualGasCost);
    assert.equal(await isAuthIdUsed(op.sponsorship.authId), true);
  });

  test("an operation whose game call reverts is still paid and still emits Sponsored", async () => {
    const op = await opFor({ data: failCall });
    const depositBefore = await read("getDeposit");
    const receipt = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [op.userOp]);
    assert.equal(receipt.status, "success");

    const { userOps, sponsored } = receiptEvents(receipt.logs);
    assert.equal(userOps.length, 1);
    assert.equal(userOps[0]!.args.success, false);
    const revertLogs = parseEventLogs({
      abi: entryPoint07Abi,
      logs: receipt.logs,
      eventName: "UserOperationRevertReason",
    });
    assert.equal(revertLogs.length, 1);
    assert.equal(
      decodeErrorResult({ abi: gameItemsAbi, data: revertLogs[0]!.args.revertReason }).errorName,
      "AlwaysFails",
    );

    assert.equal(depositBefore - (await read("getDeposit")), userOps[0]!.args.actualGasCost);
    assert.equal(sponsored.length, 1);
    assert.equal(sponsored[0]!.args.authId, op.sponsorship.authId);
    assert.equal(sponsored[0]!.args.userOpHash, op.userOpHash);
    assert.equal(await isAuthIdUsed(op.sponsorship.authId), true);
  });
});

describe("refused operations", () => {
  test("refuses an authorization signed for another sender", async () => {
    const other = await opFor();
    const op = await opFor({ sponsorship: { sender: other.sender } });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an authorization signed for another target contract", async () => {
    const op = await opFor({ sponsorship: { target: stack.accountFactory } });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an authorization signed for another function selector", async () => {
    const op = await opFor({ sponsorship: { selector: slice(failCall, 0, 4) } });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an inner call shorter than a selector", async () => {
    const op = await opFor({ data: "0xa0712d", sponsorship: { selector: "0xa0712d00" } });
    const failed = await assertRefused(op, "AA33 reverted");
    assert.equal(paymasterError(failed).errorName, "MissingSelector");
  });

  test("refuses callData that is not SimpleAccount.execute", async () => {
    const batch = encodeFunctionData({
      abi: parseAbi(["function executeBatch(address[] dest, uint256[] value, bytes[] func)"]),
      functionName: "executeBatch",
      args: [[stack.gameItems], [], [mintCall]],
    });
    const owner = randomAccount();
    const reSigned = await opFor({ owner });
    const { userOp } = await signUserOp(chain.publicClient, stack.entryPoint, owner, {
      ...reSigned.userOp,
      callData: batch,
    });
    const failed = await assertRefused({ ...reSigned, userOp }, "AA33 reverted");
    assert.equal(paymasterError(failed).errorName, "NotExecuteCall");
  });

  test("refuses truncated paymasterAndData", async () => {
    const owner = randomAccount();
    const op = await opFor({ owner });
    const truncated = slice(op.userOp.paymasterAndData, 0, 176);
    const { userOp } = await signUserOp(chain.publicClient, stack.entryPoint, owner, {
      ...op.userOp,
      paymasterAndData: truncated,
    });
    const failed = await assertRefused({ ...op, userOp }, "AA33 reverted");
    const decoded = paymasterError(failed);
    assert.equal(decoded.errorName, "MalformedPaymasterData");
    assert.deepEqual(decoded.args, [176n]);
  });

  test("refuses an authorization whose window has ended", async () => {
    const op = await opFor();
    await chain.testClient.increaseTime({ seconds: 301 });
    await chain.testClient.mine({ blocks: 1 });
    assert.ok((await latestTimestampSec(chain)) > op.sponsorship.validUntilSec);
    await assertRefused(op, "AA32 paymaster expired or not due");
  });

  test("refuses an authorization whose window has not started", async () => {
    const nowSec = await latestTimestampSec(chain);
    const op = await opFor({ sponsorship: { validAfterSec: nowSec + 3_600, validUntilSec: nowSec + 3_900 } });
    await assertRefused(op, "AA32 paymaster expired or not due");
  });

  test("refuses an authorization whose window is empty", async () => {
    const nowSec = await latestTimestampSec(chain);
    const op = await opFor({ sponsorship: { validAfterSec: nowSec, validUntilSec: nowSec } });
    const failed = await assertRefused(op, "AA33 reverted");
    const decoded = paymasterError(failed);
    assert.equal(decoded.errorName, "InvalidWindow");
    assert.deepEqual(decoded.args, [nowSec, nowSec]);
  });

  test("refuses a second operation that reuses an authorization id", async () => {
    const owner = randomAccount();
    const first = await opFor({ owner });
    await handleOps(chain.publicClient, bundler(), stack.entryPoint, [first.userOp]);
    assert.equal(await itemCount(first.sender), 1n);

    const second = await opFor({ owner, sponsorship: { authId: first.sponsorship.authId } });
    const failed = await assertRefused(second, "AA33 reverted", { minted: 1n, authIdUsed: true });
    const decoded = paymasterError(failed);
    assert.equal(decoded.errorName, "AuthorizationUsed");
    assert.deepEqual(decoded.args, [first.sponsorship.authId]);
  });

  test("refuses an operation whose maximum cost exceeds the authorized maxGasCost", async () => {
    const probe = await opFor();
    const maxCost = probe.sponsorship.maxGasCostWei;
    const op = await opFor({ sponsorship: { maxGasCostWei: maxCost - 1n } });
    const failed = await assertRefused(op, "AA33 reverted");
    const decoded = paymasterError(failed);
    assert.equal(decoded.errorName, "GasCostAboveSponsorship");
    assert.deepEqual(decoded.args, [maxCost, maxCost - 1n]);
  });

  test("refuses a postOp gas limit too small for postOp (it would cost us without a Sponsored log)", async () => {
    const op = await opFor({ paymasterGas: { ...SPONSOR_PAYMASTER_GAS_LIMITS, postOpGasLimit: 7_999n } });
    const failed = await assertRefused(op, "AA33 reverted");
    const decoded = paymasterError(failed);
    assert.equal(decoded.errorName, "PostOpGasLimitTooLow");
    assert.deepEqual(decoded.args, [7_999n, 8_000n]);
  });

  test("refuses an authorization signed by another key", async () => {
    const op = await opFor({ signer: randomAccount() });
    await assertRefused(op, "AA34 signature error");
  });

  test("refuses an authorization signed for another chain id", async () => {
    const op = await opFor({ domain: { chainId: 1 } });
    await assertRefused(op, "AA34 signature error");
  });
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
    assert.equal(await read("signer"), next.address);

    await assertRefused(await opFor(), "AA34 signature error");
    const ok = await opFor({ signer: next });
    const done = await handleOps(chain.publicClient, bundler(), stack.entryPoint, [ok.userOp]);
    assert.equal(receiptEvents(done.logs).userOps[0]?.args.success, true);
  });
});
