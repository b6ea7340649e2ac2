// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.28;

// This unit is compiled with `@account-abstraction/contracts/` remapped to the v0.8 release
// (scripts/build-contracts.ts), so SponsorPaymasterCore and these imports agree on one
// PackedUserOperation; compiled without the remapping, the two definitions clash and it fails.
import {Eip7702Support} from "@account-abstraction/contracts-v08/core/Eip7702Support.sol";
import {IEntryPoint} from "@account-abstraction/contracts-v08/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts-v08/interfaces/PackedUserOperation.sol";
import {SponsorPaymasterCore} from "./SponsorPaymasterCore.sol";

/**
 * @title SponsorPaymasterV08 (authorization version 3) for EntryPoint v0.8
 * @notice The v0.8 build of SponsorPaymasterCore: the same two authorization modes, EIP-712 domain
 * (`SponsorPaymaster`, version `3`), `paymasterAndData` layout, `SponsorshipUsed` event and
 * refusals, on v0.8's BasePaymaster. Deploy with EntryPoint v0.8
 * (`0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108`); its constructor checks the EntryPoint's ERC-165
 * interface id, so it cannot be deployed against v0.7 by mistake.
 *
 * EIP-7702. An operation whose initCode starts with the EIP-7702 marker (`0x7702` followed by
 * zeros up to 20 bytes, or just `0x7702`) is sent by an EOA whose code delegates to an account
 * implementation. EntryPoint v0.8 deploys nothing for it; instead its userOpHash replaces
 * keccak256(initCode) by keccak256(delegate ‖ initCode[20:]) (Eip7702Support), where `delegate`
 * is read from the sender's code when the operation runs, after the bundle transaction's
 * authorization list has been applied. A whole-operation authorization (mode 1) binds that same
 * value as its `initCodeHash`, not keccak256(initCode) as given, for two reasons:
 *
 * - The delegate decides what the callData does: the service decoded the calls against the
 *   implementation it was shown (`eip7702Auth.address`). Bound, a delegation swapped after signing
 *   (another authorization, another implementation) makes the signature fail (AA34) instead of
 *   spending the sponsor's gas on calls nobody decoded.
 * - The marker has two spellings (`0x7702` and `0x7702` padded to 20 bytes) that the EntryPoint
 *   treats alike; the hash it uses is the same for both, so the service and a bundler that pack
 *   the marker differently still agree.
 *
 * Any other initCode, and an empty one, is bound as keccak256(initCode), exactly as in the v0.7
 * build. A call authorization (mode 0) binds keccak256(initCode) as given, marker included; the
 * delegate is bound in both modes by `senderCodeHash`, the hash of the sender's delegation
 * designator (0xef0100 ‖ delegate), checked against EXTCODEHASH when the operation runs.
 */
contract SponsorPaymasterV08 is SponsorPaymasterCore {
    constructor(IEntryPoint entryPoint_, address signer_) SponsorPaymasterCore(entryPoint_, signer_) {}

    /**
     * The initCode hash EntryPoint v0.8 uses in its userOpHash. For an EIP-7702 operation it reads
     * the sender's code (the EntryPoint has just done the same, so the account is warm), and
     * reverts like the EntryPoint when the sender is not delegated; `getOperationHash` of such an
     * operation therefore needs the delegation in place (or a state override) to answer.
     */
    function _operationInitCodeHash(PackedUserOperation calldata userOp) internal view override returns (bytes32) {
        bytes32 eip7702Hash = Eip7702Support._getEip7702InitCodeHashOverride(userOp);
        return eip7702Hash != bytes32(0) ? eip7702Hash : keccak256(userOp.initCode);
    }
}
