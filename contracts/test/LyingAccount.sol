// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import {IAccount} from "@account-abstraction/contracts/interfaces/IAccount.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// The one call every lying contract below really makes: GameItems' `mint(uint256)`.
interface IMintable {
    function mint(uint256 itemId) external;
}

/**
 * @title LyingExecute
 * @notice For tests only: SimpleAccount's `execute(address,uint256,bytes)` selector with a body
 * that ignores its arguments and mints item `LOOT_ITEM_ID` on a fixed contract (`loot`), which a
 * studio's allowlist does not name. Whoever decodes the callData by selector sees the call the
 * player wrote in it; the chain runs this.
 */
abstract contract LyingExecute {
    uint256 public constant LOOT_ITEM_ID = 7;

    /// The contract `execute` really calls, whatever its arguments say.
    address public immutable loot;
    address public immutable entryPoint;

    error NotFromEntryPoint();

    constructor(address entryPoint_, address loot_) {
        entryPoint = entryPoint_;
        loot = loot_;
    }

    function execute(address, uint256, bytes calldata) external {
        if (msg.sender != entryPoint) revert NotFromEntryPoint();
        IMintable(loot).mint(LOOT_ITEM_ID);
    }

    /// Pays the EntryPoint what it asks (it asks nothing when a paymaster pays).
    function _payPrefund(uint256 missingAccountFunds) internal {
        if (missingAccountFunds > 0) {
            (bool paid,) = payable(msg.sender).call{value: missingAccountFunds}("");
            paid; // The EntryPoint checks its deposit itself.
        }
    }

    receive() external payable {}
}

/**
 * @title LyingAccount
 * @notice For tests only: an EntryPoint v0.7 account that validates like SimpleAccount 0.7 (its
 * owner's EIP-191 signature of the userOpHash, so only the player can use it) and lies in
 * `execute` (LyingExecute).
 */
contract LyingAccount is IAccount, LyingExecute {
    address public immutable owner;

    constructor(address owner_, address entryPoint_, address loot_) LyingExecute(entryPoint_, loot_) {
        owner = owner_;
    }

    function validateUserOp(PackedUserOperation calldata userOp, bytes32 userOpHash, uint256 missingAccountFunds)
        external
        returns (uint256 validationData)
    {
        if (msg.sender != entryPoint) revert NotFromEntryPoint();
        bytes32 hash = MessageHashUtils.toEthSignedMessageHash(userOpHash);
        (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecover(hash, userOp.signature);
        _payPrefund(missingAccountFunds);
        return error == ECDSA.RecoverError.NoError && recovered == owner ? 0 : 1;
    }
}

/**
 * @title LyingDelegate
 * @notice For tests only: an EIP-7702 delegate for EntryPoint v0.8 that validates like
 * Simple7702Account (the EOA's own signature of the userOpHash, no prefix) and lies in `execute`
 * (LyingExecute). Its state is all immutable, so it runs the same in any EOA that delegates to it.
 */
contract LyingDelegate is IAccount, LyingExecute {
    constructor(address entryPoint_, address loot_) LyingExecute(entryPoint_, loot_) {}

    function validateUserOp(PackedUserOperation calldata userOp, bytes32 userOpHash, uint256 missingAccountFunds)
        external
        returns (uint256 validationData)
    {
        if (msg.sender != entryPoint) revert NotFromEntryPoint();
        (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecover(userOpHash, userOp.signature);
        _payPrefund(missingAccountFunds);
        return error == ECDSA.RecoverError.NoError && recovered == address(this) ? 0 : 1;
    }
}
