// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import {IAccount} from "@account-abstraction/contracts/interfaces/IAccount.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/**
 * @title AdversarialAccount
 * @notice An ERC-4337 v0.7 account as a hostile player would write it, for tests only.
 *
 * It accepts every signature and anyone's calls (there is no owner), and it can end each
 * `execute` with a revert that carries `revertBytes` bytes of data. The EntryPoint copies up to
 * 2,048 bytes of that data into a UserOperationRevertReason log, and that copy is paid from the
 * operation's gas but counted against no gas limit; with tight limits the charge then exceeds the
 * prefund and the EntryPoint takes its prefund-too-low path (UserOperationPrefundTooLow), where
 * no paymaster postOp runs.
 */
contract AdversarialAccount is IAccount {
    /// Length of the revert data every `execute` ends with; 0 = return normally.
    uint256 public revertBytes;

    event RevertBytesChanged(uint256 revertBytes);

    constructor(uint256 revertBytes_) {
        revertBytes = revertBytes_;
    }

    function setRevertBytes(uint256 revertBytes_) external {
        revertBytes = revertBytes_;
        emit RevertBytesChanged(revertBytes_);
    }

    /// Any signature is good; the prefund is paid when the EntryPoint asks (it does not with a paymaster).
    function validateUserOp(PackedUserOperation calldata, bytes32, uint256 missingAccountFunds)
        external
        returns (uint256 validationData)
    {
        if (missingAccountFunds > 0) {
            (bool paid,) = payable(msg.sender).call{value: missingAccountFunds}("");
            paid; // The EntryPoint checks its deposit itself.
        }
        return 0;
    }

    /// SimpleAccount's selector: performs the call, then reverts with `revertBytes` bytes if set.
    function execute(address dest, uint256 value, bytes calldata func) external {
        (bool success, bytes memory result) = dest.call{value: value}(func);
        uint256 length = revertBytes;
        if (length > 0) {
            bytes memory data = new bytes(length);
            // Non-zero bytes, so nothing downstream can compress or skip them.
            for (uint256 i = 0; i < length; i += 32) {
                assembly ("memory-safe") {
                    mstore(add(add(data, 32), i), not(0))
                }
            }
            assembly ("memory-safe") {
                revert(add(data, 32), length)
            }
        }
        if (!success) {
            assembly ("memory-safe") {
                revert(add(result, 32), mload(result))
            }
        }
    }

    receive() external payable {}
}
