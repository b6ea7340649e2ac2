/**
 * An EIP-7702 operation through a real bundler: Alto 0.0.20 serving EntryPoint v0.7 and v0.8,
 * viem's bundler client with its Simple7702Account (`toSimple7702SmartAccount`, the canonical
 * implementation), the EOA's EIP-7702 authorization passed to sendUserOperation (viem sends it as
 * `eip7702Auth`, Alto puts it in the bundle's authorization list), and SponsorPaymasterV08 as
 * the paymaster: a stub of the final length for estimation, then a whole-operation authorization
 * (mode 1) over the estimated operation, bound to the delegate the authorization names. This is
 * what the ERC-7677 endpoint has to do for a v0.8 operation; here a local key stands in for it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { concatHex, encodeFunctionData, type Hex, http, numberToHex, parseEventLogs, zeroHash } from "viem";
import {
  createBundlerClient,
  type GetPaymasterDataParameters,
  toSimple7702SmartAccount,
  type UserOperation,
} from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { isEip7702InitCode, type SponsoredOperation } from "../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import {
  encodeOperationPaymasterAndData,
  PAYMASTER_DATA_OFFSET,
  stubPaymasterAndData,
} from "../../src/paymaster/layout.ts";
import { type DevChain, type DevnetStack, deployStack, startChain } from "../support/anvil.ts";
import { AA33_REVERT, type Bundler, startBundler } from "../support/bundler.ts";
import { gameItemsAbi, sponsorPaymasterAbi } from "../support/chain/devnet.ts";
import {
  delegationCode,
  latestTimestampSec,
  randomAccount,
  randomAuthId,
  signOperationAuthorization,
} from "../support/userop.ts";

let chain: DevChain;
let stack: DevnetStack;
let bundler: Bundler;
const signer = randomAccount();

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: signer.address });
  bundler = await startBundler({
    rpcUrl: chain.rpcUrl,
    entryPoints: [stack.entryPoint, stack.v08.entryPoint],
  });
});

after(async () => {
  await bundler?.stop();
  await chain?.stop();
});

const dataOf = (paymasterAndData: Hex): Hex => `0x${paymasterAndData.slice(2 + PAYMASTER_DATA_OFFSET * 2)}`;

/** The operation as EntryPoint v0.8 packs it, and the delegate its EIP-7702 marker stands for. */
function packed(op: UserOperation<"0.8">): SponsoredOperation {
  const initCode = op.factory ? concatHex([op.factory, op.factoryData ?? "0x"]) : "0x";
  return {
    sender: op.sender,
    nonce: op.nonce,
    initCode,
    callData: op.callData,
    accountGasLimits: concatHex([
      numberToHex(op.verificationGasLimit, { size: 16 }),
      numberToHex(op.callGasLimit, { size: 16 }),
    ]),
    preVerificationGas: op.preVerificationGas,
    gasFees: concatHex([
      numberToHex(op.maxPriorityFeePerGas, { size: 16 }),
      numberToHex(op.maxFeePerGas, { size: 16 }),
    ]),
    eip7702Delegate: isEip7702InitCode(initCode) ? op.authorization?.address : undefined,
  };
}

/** Stands in for the service's ERC-7677 endpoint on EntryPoint v0.8. */
function v08Paymaster(signed: SponsoredOperation[]) {
  const paymaster = stack.v08.paymaster;
  return {
    async getPaymasterStubData() {
      const nowSec = await latestTimestampSec(chain);
      const stub = stubPaymasterAndData({
        paymaster,
        mode: "operation",
        gas: PAYMASTER_GAS_LIMITS,
        validAfterSec: nowSec - 60,
        validUntilSec: nowSec + 300,
      });
      return {
        paymaster,
        paymasterData: dataOf(stub),
        paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit,
        paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit,
      };
    },
    async getPaymasterData(parameters: GetPaymasterDataParameters) {
      const op = packed(parameters as unknown as UserOperation<"0.8">);
      signed.push(op);
      const nowSec = await latestTimestampSec(chain);
      const terms = {
        validAfterSec: nowSec - 60,
        validUntilSec: nowSec + 300,
        authId: randomAuthId(),
        senderCodeHash: zeroHash,
      };
      const domain = { chainId: chain.chainId, paymaster };
      const signature = await signOperationAuthorization(signer, domain, PAYMASTER_GAS_LIMITS, op, terms);
      return {
        paymaster,
        paymasterData: dataOf(
          encodeOperationPaymasterAndData(domain, PAYMASTER_GAS_LIMITS, terms, signature),
        ),
        paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit,
        paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit,
      };
    },
  };
}

describe("Alto 0.0.20 with EntryPoint v0.8 and EIP-7702", () => {
  test("a Simple7702Account operation with eip7702Auth, sponsored by a whole-operation authorization, lands and is paid by SponsorPaymasterV08", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const account = await toSimple7702SmartAccount({ client: chain.publicClient, owner });
    assert.equal(account.entryPoint.address, stack.v08.entryPoint);
    assert.equal(account.authorization?.address, stack.v08.simple7702Account);
    const signed: SponsoredOperation[] = [];
    const client = createBundlerClient({
      client: chain.publicClient,
      chain: chain.chain,
      account,
      transport: http(bundler.url),
      paymaster: v08Paymaster(signed),
      pollingInterval: 50,
    });
    const authorization = await owner.signAuthorization({
      address: stack.v08.simple7702Account,
      chainId: chain.chainId,
      nonce: await chain.publicClient.getTransactionCount({ address: owner.address }),
    });
    const mint = encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [77n] });
    const userOpHash = await client.sendUserOperation({
      calls: [{ to: stack.gameItems, data: mint }],
      authorization,
    });
    const receipt = await client.waitForUserOperationReceipt({ hash: userOpHash });
    assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
    assert.equal(receipt.paymaster?.toLowerCase(), stack.v08.paymaster.toLowerCase());
    assert.equal(receipt.entryPoint.toLowerCase(), stack.v08.entryPoint.toLowerCase());

    // viem packed the marker as "0x7702"; the paymaster bound the delegate it stands for.
    assert.equal(signed.length, 1);
    assert.equal(signed[0]!.initCode, "0x7702");
    assert.equal(signed[0]!.eip7702Delegate, stack.v08.simple7702Account);
    // Alto carried the authorization: the EOA now runs Simple7702Account.
    assert.equal(
      await chain.publicClient.getCode({ address: owner.address }),
      delegationCode(stack.v08.simple7702Account).toLowerCase(),
    );
    // Logged during validation, so in the bundle transaction's logs, not the operation's own.
    const used = parseEventLogs({
      abi: sponsorPaymasterAbi,
      logs: receipt.receipt.logs,
      eventName: "SponsorshipUsed",
    });
    assert.equal(used.length, 1);
    assert.deepEqual([used[0]!.args.userOpHash, used[0]!.args.sender], [userOpHash, owner.address]);
    const items = await chain.publicClient.readContract({
      address: stack.gameItems,
      abi: gameItemsAbi,
      functionName: "itemsOf",
      args: [owner.address, 77n],
    });
    assert.equal(items, 1n);
    assert.doesNotMatch(bundler.output(), AA33_REVERT, "Alto logged a paymaster validation revert");
  });
});
