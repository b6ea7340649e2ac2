/**
 * Issue 19 on EntryPoint v0.8 with EIP-7702, on anvil with our v0.8 paymaster and the service:
 * an EOA whose code is a delegation designator runs whatever its delegate says, and the delegate
 * can change between the authorization and the bundle.
 *
 * - A lying delegate (contracts/test/LyingAccount.sol, LyingDelegate): validates like
 *   Simple7702Account (the EOA's own signature) but its `execute(address,uint256,bytes)` mints on
 *   the decoy. Named in the operation's eip7702Auth, or already installed on chain. On a
 *   `caps_only` project it lands (the attack is real); by default it is refused as
 *   `account_not_supported`.
 * - Re-delegation: the service authorizes an operation while the EOA delegates to the real
 *   Simple7702Account; the player then re-delegates the EOA to the lying delegate (a type-4
 *   transaction) and submits the operation unchanged (its userOpHash does not cover a delegation
 *   that is already on chain). The authorization binds the EOA's EXTCODEHASH, which covers the
 *   designator, so the paymaster rejects it (AA34) and nothing mints. The same operation under an
 *   authorization that binds no code (what the service signed before the fix) lands.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Address, type Hex, keccak256, type LocalAccount } from "viem";
import type { PaymasterMode } from "../../src/paymaster/layout.ts";
import {
  type AttackKit,
  askOperationAuthorization,
  assertAccountNotSupported,
  type DraftOp,
  decoyMints,
  deployAttackContract,
  draftOp,
  landAsPlayer,
  type PaymasterPair,
  signDraft,
  signedPaymasterAndData,
  simulateAsPlayer,
  sponsoredData,
  startAttackKit,
  submitAsPlayer,
} from "../support/chain/attack-kit.ts";
import { delegateEoa, getAccountNonce, randomAccount, signDelegation } from "../support/userop.ts";

let kit: AttackKit;
let v08: PaymasterPair;
let lyingDelegate: Address;

before(async () => {
  kit = await startAttackKit();
  v08 = { entryPoint: kit.stack.v08.entryPoint, paymaster: kit.stack.v08.paymaster };
  lyingDelegate = await deployAttackContract(kit.chain, "LyingDelegate", [v08.entryPoint, kit.decoy]);
});

after(async () => {
  await kit?.stop();
});

type Mode = PaymasterMode;
const MODES: Mode[] = ["call", "operation"];

type Where = "in the operation (eip7702Auth)" | "already on chain";
const WHERE: Where[] = ["in the operation (eip7702Auth)", "already on chain"];

/** A fresh EOA and its operation calling the allowlisted mint, delegating to `delegate` as `where` says. */
async function eoaOperation(delegate: Address, where: Where): Promise<{ eoa: LocalAccount; op: DraftOp }> {
  const eoa = randomAccount();
  if (where === "already on chain") {
    await delegateEoa(kit.chain, eoa, delegate);
    return { eoa, op: await draftOp(kit, { sender: eoa.address, entryPoint: v08.entryPoint }) };
  }
  const eip7702Auth = await signDelegation(kit.chain.publicClient, eoa, delegate);
  const op = await draftOp(kit, {
    sender: eoa.address,
    entryPoint: v08.entryPoint,
    factory: "0x7702",
    eip7702Auth,
  });
  return { eoa, op };
}

/** Signs as Simple7702Account checks (the userOpHash itself) and lands it as the player. */
function land(attempt: { eoa: LocalAccount; op: DraftOp }, paymasterAndData: Hex) {
  return landAsPlayer(kit, v08.entryPoint, attempt.eoa, attempt.op, paymasterAndData, "raw");
}

describe("an EIP-7702 EOA delegating to a lying implementation (EntryPoint v0.8, /rpc)", () => {
  for (const where of WHERE) {
    test(`delegation ${where}, caps_only project: the service signs it and it mints on the non-allowlisted decoy (the attack is real)`, async () => {
      const attempt = await eoaOperation(lyingDelegate, where);
      const mints = await decoyMints(kit);
      const answer = await askOperationAuthorization(kit, kit.capsOnly, attempt.op, v08.entryPoint);
      await land(attempt, sponsoredData(answer));
      assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
    });

    test(`delegation ${where}, default project: refused as account_not_supported, nothing lands`, async () => {
      const attempt = await eoaOperation(lyingDelegate, where);
      await assertAccountNotSupported(kit, kit.defended, () =>
        askOperationAuthorization(kit, kit.defended, attempt.op, v08.entryPoint),
      );
    });
  }
});

describe("re-delegation after the authorization (EntryPoint v0.8)", () => {
  /** An EOA delegated on chain to the real Simple7702Account, and its next operation. */
  function honestEoa() {
    return eoaOperation(kit.stack.v08.simple7702Account, "already on chain");
  }

  /**
   * Mode 1 from the service (/rpc on the default project); mode 0 signed here with the service's
   * key binding the EOA's EXTCODEHASH as the service binds it, because /sponsor/authorize serves
   * EntryPoint v0.7 only.
   */
  async function boundAuthorization(attempt: { eoa: LocalAccount; op: DraftOp }, mode: Mode): Promise<Hex> {
    if (mode === "operation") {
      return sponsoredData(await askOperationAuthorization(kit, kit.defended, attempt.op, v08.entryPoint));
    }
    const codeHash = keccak256((await kit.chain.publicClient.getCode({ address: attempt.eoa.address }))!);
    return signedPaymasterAndData(kit, v08, attempt.op, "call", codeHash);
  }

  for (const mode of MODES) {
    test(`${mode} authorization given while the EOA ran Simple7702Account: rejected on chain (AA34) once the EOA re-delegates to the lying delegate; nothing mints`, async () => {
      const attempt = await honestEoa();
      const paymasterAndData = await boundAuthorization(attempt, mode);
      const userOp = await signDraft(
        kit.chain,
        v08.entryPoint,
        attempt.eoa,
        attempt.op,
        paymasterAndData,
        "raw",
      );
      assert.equal(
        await simulateAsPlayer(kit, v08.entryPoint, userOp),
        undefined,
        "valid while the delegate is Simple7702Account",
      );

      await delegateEoa(kit.chain, attempt.eoa, lyingDelegate);
      const mints = await decoyMints(kit);
      const refused = await submitAsPlayer(kit, v08.entryPoint, userOp);
      assert.match(refused?.reason ?? "", /AA34/, "the paymaster rejects the changed code");
      assert.equal(await decoyMints(kit), mints, "the decoy never minted");
      const nonce = await getAccountNonce(kit.chain.publicClient, v08.entryPoint, attempt.eoa.address);
      assert.equal(nonce, attempt.op.nonce, "the operation never ran");
    });

    test(`${mode} authorization binding no code (as signed before the fix): the same re-delegation lands and mints on the decoy (the attack is real)`, async () => {
      const attempt = await honestEoa();
      const paymasterAndData = await signedPaymasterAndData(kit, v08, attempt.op, mode);
      await delegateEoa(kit.chain, attempt.eoa, lyingDelegate);
      const mints = await decoyMints(kit);
      await land(attempt, paymasterAndData);
      assert.equal(await decoyMints(kit), mints + 1, "the decoy minted");
    });
  }
});
