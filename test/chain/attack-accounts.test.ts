/**
 * Issue 19, on anvil with the real EntryPoint v0.7, our paymaster and the service: account code
 * and factories that do something other than what the operation's callData says.
 *
 * - LyingAccount: validates like SimpleAccount (only its owner can use it), but its
 *   `execute(address,uint256,bytes)` ignores its arguments and mints on the decoy. The callData
 *   the service reads is `execute(gameItems, 0, mint(7))`, which the project allowlists.
 * - SideEffectFactory: the initCode's factory mints on the decoy, then has the real
 *   SimpleAccountFactory deploy a genuine SimpleAccount at the address the operation names.
 *
 * Each is tried through both ways in (call authorization on /sponsor/authorize, whole-operation
 * authorization on /rpc), the player being their own bundler. On a `caps_only` project (what
 * every project had before the fix) the attack lands and mints on the decoy: the attack is real.
 * On a default project the service refuses it with `account_not_supported`, and the decoy never
 * mints. A control shows the defended project still sponsors a genuine SimpleAccount deployed by
 * the known factory in the same operation.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, encodeFunctionData, type LocalAccount } from "viem";
import type { PaymasterMode } from "../../src/paymaster/layout.ts";
import {
  type AttackKit,
  askSponsorship,
  assertAccountNotSupported,
  type DraftOp,
  decoyMints,
  deployAttackContract,
  draftOp,
  landAsPlayer,
  type Sponsorship,
  sponsoredData,
  startAttackKit,
} from "../support/chain/attack-kit.ts";
import { gameItemsAbi } from "../support/chain/devnet.ts";
import { getAccountAddress, simpleAccountFactoryAbi } from "../support/chain/userop.ts";
import { ITEM_ID, type Project } from "../support/chain-service.ts";
import { randomAccount } from "../support/userop.ts";

type Mode = PaymasterMode;
const MODES: Mode[] = ["call", "operation"];

let kit: AttackKit;
let sideEffectFactory: Address;

before(async () => {
  kit = await startAttackKit();
  sideEffectFactory = await deployAttackContract(kit.chain, "SideEffectFactory", [
    kit.stack.accountFactory,
    kit.decoy,
  ]);
});

after(async () => {
  await kit?.stop();
});

function ask(p: Project, op: DraftOp, mode: Mode): Promise<Sponsorship> {
  return askSponsorship(kit, p, op, mode);
}

/** A LyingAccount of a fresh owner, deployed (it needs no factory). */
async function lyingAccount() {
  const owner = randomAccount();
  const sender = await deployAttackContract(kit.chain, "LyingAccount", [
    owner.address,
    kit.stack.entryPoint,
    kit.decoy,
  ]);
  return { owner, op: await draftOp(kit, { sender }) };
}

/** A genuine SimpleAccount of a fresh owner, not deployed yet, whose initCode names `factory`. */
async function counterfactualAccount(factory: Address) {
  const owner = randomAccount();
  const sender = await getAccountAddress(kit.chain.publicClient, kit.stack.accountFactory, owner.address);
  const factoryData = encodeFunctionData({
    abi: simpleAccountFactoryAbi,
    functionName: "createAccount",
    args: [owner.address, 0n],
  });
  return { owner, op: await draftOp(kit, { sender, factory, factoryData }) };
}

/** The sponsored operation, signed as SimpleAccount 0.7 signs (EIP-191 over the userOpHash), landed by the player. */
function land(attempt: { owner: LocalAccount; op: DraftOp }, s: Sponsorship) {
  return landAsPlayer(kit, kit.stack.entryPoint, attempt.owner, attempt.op, sponsoredData(s), "personal");
}

/** The defended project refuses it: account_not_supported, nothing recorded, nothing minted. */
function assertRefused(attempt: { op: DraftOp }, mode: Mode) {
  return assertAccountNotSupported(kit, kit.defended, () => ask(kit.defended, attempt.op, mode));
}

async function itemsOf(owner: Address): Promise<bigint> {
  return kit.chain.publicClient.readContract({
    address: kit.stack.gameItems,
    abi: gameItemsAbi,
    functionName: "itemsOf",
    args: [owner, ITEM_ID],
  });
}

describe("a lying account: execute(address,uint256,bytes) that ignores its arguments", () => {
  for (const mode of MODES) {
    test(`${mode} authorization, caps_only project: the service signs it and it mints on the non-allowlisted decoy (the attack is real)`, async () => {
      const attempt = await lyingAccount();
      const mints = await decoyMints(kit);
      await land(attempt, await ask(kit.capsOnly, attempt.op, mode));
      assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
      assert.equal(await itemsOf(attempt.op.sender), 0n, "the allowlisted call never ran");
    });

    test(`${mode} authorization, default project: refused as account_not_supported, nothing lands`, async () => {
      await assertRefused(await lyingAccount(), mode);
    });
  }
});

describe("a factory with a side effect: createAccount mints on the decoy, then deploys a genuine SimpleAccount", () => {
  for (const mode of MODES) {
    test(`${mode} authorization with the initCode, caps_only project: the service signs it and the decoy mints during deployment (the attack is real)`, async () => {
      const attempt = await counterfactualAccount(sideEffectFactory);
      const mints = await decoyMints(kit);
      await land(attempt, await ask(kit.capsOnly, attempt.op, mode));
      assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
      assert.equal(
        await itemsOf(attempt.op.sender),
        1n,
        "the account is genuine: its allowlisted call ran too",
      );
    });

    test(`${mode} authorization with the initCode, default project: the unknown factory is refused as account_not_supported, nothing lands`, async () => {
      const attempt = await counterfactualAccount(sideEffectFactory);
      await assertRefused(attempt, mode);
      const code = await kit.chain.publicClient.getCode({ address: attempt.op.sender });
      assert.equal(code ?? "0x", "0x", "the account was not deployed");
    });

    test(`control, ${mode} authorization: the default project sponsors the same SimpleAccount deployed by the known factory, and only the allowlisted call runs`, async () => {
      const attempt = await counterfactualAccount(kit.stack.accountFactory);
      const mints = await decoyMints(kit);
      await land(attempt, await ask(kit.defended, attempt.op, mode));
      assert.equal(await itemsOf(attempt.op.sender), 1n);
      assert.equal(await decoyMints(kit), mints);
    });
  }
});
