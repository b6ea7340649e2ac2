/**
 * Issue 19 with ERC-7579 accounts, on anvil with the real EntryPoint v0.7, our paymaster and the
 * service: audited stock account code (OpenZeppelin 5.7's AccountERC7579 and
 * AccountERC7579Hooked) made to lie by a module the player installed on their own account, paying
 * for that installation themselves (contracts/test/Rogue7579Modules.sol).
 *
 * - A fallback for 0xb61d27f6 that acts as executor: AccountERC7579 has no
 *   `execute(address,uint256,bytes)`, so a call with that selector goes to the fallback module,
 *   which ignores the arguments and has the account mint on the decoy through
 *   `executeFromExecutor`. The account is the repo's Modular7579Account, a known implementation;
 *   by default the service refuses it in both modes (the selector is not one of the
 *   implementation's own, and the installed modules are not known ones). A `caps_only` project
 *   takes an account with unknown modules as unknown code and signs it with no code bound
 *   (module installs do not change the account's code hash anyway), and it lands.
 * - A hook whose preCheck mints on the decoy before every execution, on an AccountERC7579Hooked
 *   account making an allowlisted ERC-7579 `execute`. The registry does not know that account,
 *   so it is refused as unknown code by default, and lands on a `caps_only` project.
 *
 * A control shows the default project sponsoring the same Modular7579Account without modules.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Address, Hex, LocalAccount } from "viem";
import type { PaymasterMode } from "../../src/paymaster/layout.ts";
import {
  type AttackKit,
  askSponsorship,
  assertAccountNotSupported,
  type DraftOp,
  decoyMints,
  deployAttackContract,
  draftOp,
  erc7579ModuleConfigAbi,
  installModuleCall,
  landAsPlayer,
  MODULE_TYPE,
  runUnsponsored,
  type Sponsorship,
  sponsoredData,
  startAttackKit,
} from "../support/chain/attack-kit.ts";
import {
  deployModular7579Factory,
  encodeErc7579Execute,
  modular7579AccountFactoryAbi,
} from "../support/chain/modular-account.ts";
import { executeCallData } from "../support/chain/userop.ts";
import { mintCall, type Project } from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

type Mode = PaymasterMode;
const MODES: Mode[] = ["call", "operation"];
/** SimpleAccount's `execute(address,uint256,bytes)`, which AccountERC7579 does not have. */
const SIMPLE_EXECUTE_SELECTOR: Hex = "0xb61d27f6";

let kit: AttackKit;
let factory: Address;
let fallbackModule: Address;
let hook: Address;

before(async () => {
  kit = await startAttackKit();
  factory = await deployModular7579Factory(kit.chain);
  fallbackModule = await deployAttackContract(kit.chain, "FallbackExecutorModule", [kit.decoy]);
  hook = await deployAttackContract(kit.chain, "PreCheckHook", [kit.decoy]);
});

after(async () => {
  await kit?.stop();
});

function ask(p: Project, op: DraftOp, mode: Mode): Promise<Sponsorship> {
  return askSponsorship(kit, p, op, mode);
}

/** A Modular7579Account of a fresh owner, deployed by its factory (anyone may call createAccount). */
async function modularAccount(): Promise<{ owner: LocalAccount; account: Address }> {
  const owner = randomAccount();
  const hash = await kit.chain.wallets[0]!.writeContract({
    address: factory,
    abi: modular7579AccountFactoryAbi,
    functionName: "createAccount",
    args: [owner.address, 0n],
  });
  await kit.chain.publicClient.waitForTransactionReceipt({ hash });
  const account = await kit.chain.publicClient.readContract({
    address: factory,
    abi: modular7579AccountFactoryAbi,
    functionName: "getAddress",
    args: [owner.address, 0n],
  });
  return { owner, account };
}

/** The stock account with the player's module installed as executor and as the fallback for 0xb61d27f6. */
async function accountWithFallbackExecutor() {
  const { owner, account } = await modularAccount();
  const install = encodeErc7579Execute([
    { to: account, data: installModuleCall(MODULE_TYPE.executor, fallbackModule) },
    { to: account, data: installModuleCall(MODULE_TYPE.fallback, fallbackModule, SIMPLE_EXECUTE_SELECTOR) },
  ]);
  await runUnsponsored(kit, owner, account, install, "raw");
  for (const type of [MODULE_TYPE.executor, MODULE_TYPE.fallback]) {
    const installed = await kit.chain.publicClient.readContract({
      address: account,
      abi: erc7579ModuleConfigAbi,
      functionName: "isModuleInstalled",
      args: [type, fallbackModule, type === MODULE_TYPE.fallback ? SIMPLE_EXECUTE_SELECTOR : "0x"],
    });
    assert.equal(installed, true, `module type ${type} installed`);
  }
  // The callData every project's allowlist accepts when read as SimpleAccount's execute.
  const op = await draftOp(kit, {
    sender: account,
    callData: executeCallData(kit.stack.gameItems, mintCall),
  });
  return { owner, op };
}

/** OpenZeppelin's AccountERC7579Hooked with the player's PreCheckHook, calling the allowlisted mint through ERC-7579 execute. */
async function hookedAccount() {
  const owner = randomAccount();
  const account = await deployAttackContract(kit.chain, "Hooked7579Account", [owner.address]);
  await runUnsponsored(kit, owner, account, installModuleCall(MODULE_TYPE.hook, hook), "raw");
  const callData = encodeErc7579Execute([{ to: kit.stack.gameItems, data: mintCall }]);
  return { owner, op: await draftOp(kit, { sender: account, callData }) };
}

/** Signs as OpenZeppelin's SignerECDSA checks (the userOpHash itself) and lands it as the player. */
function land(attempt: { owner: LocalAccount; op: DraftOp }, paymasterAndData: Hex) {
  return landAsPlayer(kit, kit.stack.entryPoint, attempt.owner, attempt.op, paymasterAndData, "raw");
}

function assertRefused(p: Project, op: DraftOp, mode: Mode) {
  return assertAccountNotSupported(kit, p, () => ask(p, op, mode));
}

describe("stock AccountERC7579 with a player-installed fallback for 0xb61d27f6 that acts as executor", () => {
  for (const mode of MODES) {
    test(`${mode} authorization, caps_only project: the service signs it and the module mints on the non-allowlisted decoy (the attack is real)`, async () => {
      const attempt = await accountWithFallbackExecutor();
      const mints = await decoyMints(kit);
      await land(attempt, sponsoredData(await ask(kit.capsOnly, attempt.op, mode)));
      assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
    });

    test(`${mode} authorization, default project: refused as account_not_supported, nothing lands`, async () => {
      const attempt = await accountWithFallbackExecutor();
      await assertRefused(kit.defended, attempt.op, mode);
    });
  }

  test("control: the same account without modules is sponsored on the default project for an ERC-7579 execute of the allowlisted mint", async () => {
    const { owner, account } = await modularAccount();
    const callData = encodeErc7579Execute([{ to: kit.stack.gameItems, data: mintCall }]);
    const op = await draftOp(kit, { sender: account, callData });
    const mints = await decoyMints(kit);
    await land({ owner, op }, sponsoredData(await ask(kit.defended, op, "operation")));
    assert.equal(await decoyMints(kit), mints);
  });
});

describe("AccountERC7579Hooked with a player-installed hook whose preCheck makes its own call", () => {
  test("whole-operation authorization, caps_only project: the service signs it and the hook mints on the non-allowlisted decoy (the attack is real)", async () => {
    const attempt = await hookedAccount();
    const mints = await decoyMints(kit);
    await land(attempt, sponsoredData(await ask(kit.capsOnly, attempt.op, "operation")));
    assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
  });

  for (const mode of MODES) {
    test(`${mode} authorization, default project: refused as account_not_supported, nothing lands`, async () => {
      const attempt = await hookedAccount();
      await assertRefused(kit.defended, attempt.op, mode);
    });
  }
});
