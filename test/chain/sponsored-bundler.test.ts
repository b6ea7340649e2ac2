/**
 * An honest sponsored operation the way a studio's client sends it: viem's bundler client and
 * permissionless's SimpleAccount, a real Alto bundler, and the service's `POST /sponsor/authorize`
 * as the paymaster. Shows that:
 * - Alto's gas estimation (which replaces the paymaster's gas limits and signs nothing) runs
 *   through the paymaster without an AA33, with a stub and with a real authorization;
 * - the operation is charged to the tank exactly its on-chain `actualGasCost`;
 * - the reservation is within 3× of that actual cost (it was 475× with the fixed fee cap).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { toSimpleSmartAccount } from "permissionless/accounts";
import { type Address, concatHex, encodeFunctionData, type Hex, http, parseEther } from "viem";
import {
  createBundlerClient,
  type GetPaymasterDataParameters,
  type UserOperation,
} from "viem/account-abstraction";
import { creditDeposit } from "../../src/ledger/ledger.ts";
import { PAYMASTER_GAS_LIMITS } from "../../src/paymaster/gas.ts";
import { stubPaymasterAndData } from "../../src/paymaster/layout.ts";
import { seedProject, type TestApp } from "../support/app.ts";
import { AA33_REVERT, type Bundler, startBundler } from "../support/bundler.ts";
import type { DevChain } from "../support/chain/anvil.ts";
import { type DevnetStack, gameItemsAbi } from "../support/chain/devnet.ts";
import {
  type Authorization,
  allowlist,
  authorize,
  balanceOf,
  MINT_SELECTOR,
  type Project,
  type ServiceOnChain,
  settlementWatcherOn,
  startServiceOnChain,
} from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

const TANK_WEI = parseEther("2");

let service: ServiceOnChain;
let chain: DevChain;
let stack: DevnetStack;
let bundler: Bundler;
let t: TestApp;
let p: Project;

before(async () => {
  service = await startServiceOnChain({ confirmations: 0 });
  ({ chain, stack, t } = service);
  bundler = await startBundler({ rpcUrl: chain.rpcUrl, entryPoints: [stack.entryPoint] });
  p = await seedProject(t);
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, { projectId: p.projectId, reference: "bundler:tank", amountWei: TANK_WEI });
});

after(async () => {
  await bundler?.stop();
  await service?.stop();
});

const mint = (itemId: bigint) => ({
  to: stack.gameItems,
  data: encodeFunctionData({ abi: gameItemsAbi, functionName: "mint", args: [itemId] }),
});

/**
 * The paymaster as a studio's client wires it into viem with `POST /sponsor/authorize`: a stub of
 * the final length for estimation (the service's own layout, with a dummy signature), then one
 * authorization for the estimated operation, whose fees are kept within the ceilings it returns.
 */
function servicePaymaster(authorizations: Authorization[]) {
  const nowSec = () => Math.floor(Date.now() / 1000);
  return {
    async getPaymasterStubData() {
      const data = stubPaymasterAndData({
        paymaster: stack.paymaster,
        mode: "call",
        gas: PAYMASTER_GAS_LIMITS,
        validUntilSec: nowSec() + 300,
        validAfterSec: nowSec() - 60,
      });
      return {
        paymaster: stack.paymaster,
        paymasterData: `0x${data.slice(2 + 52 * 2)}` as Hex,
        paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit,
        paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit,
      };
    },
    async getPaymasterData(parameters: GetPaymasterDataParameters) {
      const op = parameters as unknown as UserOperation<"0.7">;
      const estimatedGas =
        op.verificationGasLimit +
        op.callGasLimit +
        op.preVerificationGas +
        PAYMASTER_GAS_LIMITS.verificationGasLimit +
        PAYMASTER_GAS_LIMITS.postOpGasLimit;
      const auth = await authorize(t, p, {
        user: op.sender,
        target: stack.gameItems,
        selector: MINT_SELECTOR,
        estimatedGas,
        initCode: op.factory ? concatHex([op.factory, op.factoryData ?? "0x"]) : undefined,
      });
      authorizations.push(auth);
      const min = (a: bigint, b: bigint) => (a < b ? a : b);
      return {
        paymaster: stack.paymaster,
        paymasterData: auth.paymasterData,
        maxFeePerGas: min(op.maxFeePerGas, BigInt(auth.maxFeePerGas)),
        maxPriorityFeePerGas: min(op.maxPriorityFeePerGas, BigInt(auth.maxPriorityFeePerGas)),
      };
    },
  };
}

async function sendSponsored(owner = randomAccount(), itemId = 7n) {
  const account = await toSimpleSmartAccount({
    client: chain.publicClient,
    owner,
    entryPoint: { address: stack.entryPoint, version: "0.7" },
    factoryAddress: stack.accountFactory,
  });
  const authorizations: Authorization[] = [];
  const client = createBundlerClient({
    client: chain.publicClient,
    chain: chain.chain,
    account,
    transport: http(bundler.url),
    paymaster: servicePaymaster(authorizations),
    pollingInterval: 50,
  });
  const userOpHash = await client.sendUserOperation({ calls: [mint(itemId)] });
  const receipt = await client.waitForUserOperationReceipt({ hash: userOpHash });
  assert.equal(receipt.success, true, `operation failed: ${receipt.reason}\n${bundler.output()}`);
  assert.equal(authorizations.length, 1, "one authorization, one reservation, per operation");
  return { account: account.address as Address, receipt, auth: authorizations[0]! };
}

async function settle() {
  await settlementWatcherOn(service, { confirmations: 0, startBlock: 0n }).tick();
}

describe("an honest operation through Alto, sponsored by the service", () => {
  test("is charged exactly its actualGasCost, reserves within 3× of it, and estimation logs no AA33", async (t_) => {
    const owner = randomAccount();
    // The first operation also deploys the account; the second is the typical one.
    const first = await sendSponsored(owner, 7n);
    await settle();
    const before = await balanceOf(t, p);
    const typical = await sendSponsored(owner, 8n);
    assert.equal(typical.account, first.account);
    await settle();

    const actual = typical.receipt.actualGasCost;
    const reserved = BigInt(typical.auth.maxGasCost);
    // The tank gave back the reservation and kept exactly what the EntryPoint charged.
    const after = await balanceOf(t, p);
    assert.equal(before - after, actual);
    const [row] = await t.db.query<{ status: string; actual_gas_cost: string }>(
      "SELECT status, actual_gas_cost::text FROM sponsorships WHERE auth_id = decode(substr($1, 3), 'hex')",
      [typical.auth.authorizationId.toLowerCase()],
    );
    assert.deepEqual(row, { status: "success", actual_gas_cost: actual.toString() });

    const ratio = Number((reserved * 1000n) / actual) / 1000;
    const firstRatio = Number((BigInt(first.auth.maxGasCost) * 1000n) / first.receipt.actualGasCost) / 1000;
    t_.diagnostic(`typical operation: reserved ${reserved} wei, actual ${actual} wei, ${ratio}×`);
    t_.diagnostic(`first operation (deploys the account): ${firstRatio}×`);
    assert.ok(reserved <= 3n * actual, `reservation ${reserved} is more than 3× the actual ${actual}`);
    assert.doesNotMatch(bundler.output(), AA33_REVERT, "Alto logged a paymaster validation revert");
  });

  test("Alto estimates an operation that already carries a real authorization without an AA33", async () => {
    const owner = randomAccount();
    await sendSponsored(owner, 9n);
    const account = await toSimpleSmartAccount({
      client: chain.publicClient,
      owner,
      entryPoint: { address: stack.entryPoint, version: "0.7" },
      factoryAddress: stack.accountFactory,
    });
    const client = createBundlerClient({ client: chain.publicClient, account, transport: http(bundler.url) });
    const authorizations: Authorization[] = [];
    const pm = servicePaymaster(authorizations);
    const prepared = await client.prepareUserOperation({ calls: [mint(10n)], paymaster: pm });
    // Estimation replaces the paymaster's limits with its own, so the signature no longer
    // matches: the contract reports that as a signature failure, which estimation tolerates.
    const estimate = await client.estimateUserOperationGas({
      ...prepared,
      paymasterVerificationGasLimit: PAYMASTER_GAS_LIMITS.verificationGasLimit,
      paymasterPostOpGasLimit: PAYMASTER_GAS_LIMITS.postOpGasLimit,
    });
    assert.ok(estimate.callGasLimit > 0n);
    assert.doesNotMatch(bundler.output(), AA33_REVERT);
  });
});
