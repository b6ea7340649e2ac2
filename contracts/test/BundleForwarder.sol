// SPDX-License-Identifier: MIT
pragma solidity ^0.8.23;

import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/**
 * @title BundleForwarder
 * @notice Submits bundles to the EntryPoint from a contract instead of an EOA, for tests only: a
 * settlement that reads transactions sent to the EntryPoint would miss these, one that reads the
 * EntryPoint's and the paymaster's logs would not.
 */
contract BundleForwarder {
    function forwardHandleOps(IEntryPoint ep, PackedUserOperation[] calldata ops, address payable beneficiary)
        external
    {
        ep.handleOps(ops, beneficiary);
    }

    /// Typically with aggregator address(0): operations whose accounts validate their own signatures.
    function forwardAggregatedOps(
        IEntryPoint ep,
        IEntryPoint.UserOpsPerAggregator[] calldata opsPerAggregator,
        address payable beneficiary
    ) external {
        ep.handleAggregatedOps(opsPerAggregator, beneficiary);
    }
}
