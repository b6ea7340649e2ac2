// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import {IMintable} from "./LyingAccount.sol";

/// The v0.7 SimpleAccountFactory's interface (createAccount is open to anyone in that release).
interface ISimpleAccountFactory {
    function createAccount(address owner, uint256 salt) external returns (address account);
    function getAddress(address owner, uint256 salt) external view returns (address);
}

/**
 * @title SideEffectFactory
 * @notice For tests only: a factory for an operation's initCode whose account is genuine (the
 * real SimpleAccountFactory deploys it: an ERC1967Proxy to the real SimpleAccount
 * implementation, at the address that factory predicts) but whose `createAccount` first mints on
 * a contract the studio never allowlisted. Nothing about the account's code betrays it; only the
 * factory in initCode does.
 */
contract SideEffectFactory {
    uint256 public constant LOOT_ITEM_ID = 7;

    ISimpleAccountFactory public immutable accountFactory;
    /// The contract `createAccount` mints on before deploying the account.
    address public immutable loot;

    constructor(ISimpleAccountFactory accountFactory_, address loot_) {
        accountFactory = accountFactory_;
        loot = loot_;
    }

    function createAccount(address owner, uint256 salt) external returns (address account) {
        IMintable(loot).mint(LOOT_ITEM_ID);
        return accountFactory.createAccount(owner, salt);
    }

    function getAddress(address owner, uint256 salt) external view returns (address) {
        return accountFactory.getAddress(owner, salt);
    }
}
