// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

/**
 * @title GameItems
 * @notice A stand-in for a game's contract in tests and the demo: one call that changes state
 * and one that always reverts, so both outcomes of a sponsored operation can be observed.
 */
contract GameItems {
    /// How many of each item a player holds.
    mapping(address player => mapping(uint256 itemId => uint256 count)) public itemsOf;

    event ItemMinted(address indexed player, uint256 indexed itemId, uint256 newCount);

    error AlwaysFails();

    function mint(uint256 itemId) external {
        uint256 newCount = ++itemsOf[msg.sender][itemId];
        emit ItemMinted(msg.sender, itemId, newCount);
    }

    function fail() external pure {
        revert AlwaysFails();
    }
}
