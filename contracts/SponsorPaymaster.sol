// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {SponsorPaymasterCore} from "./SponsorPaymasterCore.sol";

/**
 * @title SponsorPaymaster (authorization version 3) for EntryPoint v0.7
 * @notice The v0.7 build of SponsorPaymasterCore, which holds the authorization, its layout and
 * its NatSpec. Deploy with EntryPoint v0.7 (`0x0000000071727De22E5E9d8BAf0edAc6f37da032`).
 */
contract SponsorPaymaster is SponsorPaymasterCore {
    constructor(IEntryPoint entryPoint_, address signer_) SponsorPaymasterCore(entryPoint_, signer_) {}

    /// EntryPoint v0.7 hashes initCode as it is: a factory address followed by its call.
    function _operationInitCodeHash(PackedUserOperation calldata userOp) internal pure override returns (bytes32) {
        return keccak256(userOp.initCode);
    }
}
