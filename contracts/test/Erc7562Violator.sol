// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {IPaymaster} from "@account-abstraction/contracts/interfaces/IPaymaster.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/// A contract that is no entity of any operation: the violator writes to its storage and pays it.
contract Erc7562Bystander {
    uint256 public count;

    function bump() external {
        count += 1;
    }

    receive() external payable {}
}

/**
 * @title Erc7562Violator
 * @notice A paymaster for tests only, which breaks one ERC-7562 validation rule of its caller's
 * choosing while validating, and is otherwise valid: it pays for every operation, with no window
 * and no signature. The test staking it shows that a trace-based ERC-7562 check refuses each
 * violation, and that the same paymaster with no violation passes.
 *
 * `paymasterAndData[52]` picks the violation (`Violation`); any other length or value reverts.
 * Every mode records what it observed in the paymaster's own storage, which a staked paymaster
 * may do, so the optimizer keeps the offending instruction.
 */
contract Erc7562Violator is IPaymaster {
    enum Violation {
        None, // breaks nothing
        Timestamp, // [OP-011] reads block.timestamp
        GasLeft, // [OP-012] reads gasleft() for anything but a call
        ForeignStorageWrite, // [STO-033] writes a slot of a non-entity contract associated with no one
        NoCodeCall, // [OP-041] calls an address with no code
        ValueCall, // [OP-061] sends value in a call that is not to the EntryPoint
        EntryPointCall // [OP-054] calls the EntryPoint (balanceOf) during validation
    }

    /// An address with no code on any chain this runs on (not a precompile).
    address private constant NO_CODE = address(0x000000000000000000000000000000000000dEaD);

    IEntryPoint public immutable entryPoint;
    Erc7562Bystander public immutable bystander;

    /// The last value validation observed.
    uint256 public observed;

    error NotFromEntryPoint();
    error UnknownViolation(uint256 length);

    constructor(IEntryPoint entryPoint_) payable {
        entryPoint = entryPoint_;
        bystander = new Erc7562Bystander();
    }

    /// Deposit for gas, paid by the caller.
    function deposit() external payable {
        entryPoint.depositTo{value: msg.value}(address(this));
    }

    /// Stake in the EntryPoint, paid by the caller (anyone: this is a test contract).
    function addStake(uint32 unstakeDelaySec) external payable {
        entryPoint.addStake{value: msg.value}(unstakeDelaySec);
    }

    function validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32, uint256)
        external
        returns (bytes memory context, uint256 validationData)
    {
        if (msg.sender != address(entryPoint)) revert NotFromEntryPoint();
        bytes calldata data = userOp.paymasterAndData;
        if (data.length != 53 || uint8(data[52]) > uint8(type(Violation).max)) revert UnknownViolation(data.length);
        Violation violation = Violation(uint8(data[52]));

        uint256 value = 1;
        if (violation == Violation.Timestamp) {
            value = block.timestamp;
        } else if (violation == Violation.GasLeft) {
            value = gasleft();
        } else if (violation == Violation.ForeignStorageWrite) {
            bystander.bump();
        } else if (violation == Violation.NoCodeCall) {
            (bool ok,) = NO_CODE.staticcall("");
            value = ok ? 2 : 3;
        } else if (violation == Violation.ValueCall) {
            (bool ok,) = address(bystander).call{value: 1}("");
            value = ok ? 4 : 5;
        } else if (violation == Violation.EntryPointCall) {
            value = entryPoint.balanceOf(address(this));
        }
        observed = value;
        return ("", 0);
    }

    /// Never called: validation returns an empty context.
    function postOp(PostOpMode, bytes calldata, uint256, uint256) external pure {}
}
