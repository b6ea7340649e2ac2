// SPDX-License-Identifier: MIT
pragma solidity ^0.8.27;

// OpenZeppelin Contracts 5.7, installed beside the paymaster's pinned 5.0.2 under the npm alias
// `@openzeppelin/contracts-v5x` and imported by that name: the build needs no remapping (a
// remapping is part of every contract's metadata, so adding one to a compilation would change
// the bytecode of everything else it builds).
import {IEntryPoint} from "@openzeppelin/contracts-v5x/interfaces/IERC4337.sol";
import {AccountERC7579} from "@openzeppelin/contracts-v5x/account/extensions/draft-AccountERC7579.sol";
import {ERC4337Utils} from "@openzeppelin/contracts-v5x/account/utils/ERC4337Utils.sol";
import {Clones} from "@openzeppelin/contracts-v5x/proxy/Clones.sol";
import {Initializable} from "@openzeppelin/contracts-v5x/proxy/utils/Initializable.sol";
import {SignerECDSA} from "@openzeppelin/contracts-v5x/utils/cryptography/signers/SignerECDSA.sol";

/**
 * @title Modular7579Account
 * @notice For tests only: OpenZeppelin's ERC-7579 modular account (AccountERC7579) with one ECDSA
 * owner, serving EntryPoint v0.7. Its calls go through ERC-7579 `execute(bytes32,bytes)`.
 *
 * Validation: AccountERC7579 hands an operation to the validator module named by the top 20
 * bytes of its nonce key when that module is installed, and otherwise to the account's own
 * signer. No module is installed here, so every operation (nonce key 0) is checked by
 * SignerECDSA: a 65-byte ECDSA signature of the EntryPoint's userOpHash itself, with no EIP-191
 * prefix (Account._signableUserOpHash returns the hash unchanged). AccountERC7579 answers false
 * for raw signatures so that only modules validate; this account restores SignerECDSA's answer.
 *
 * Deployed as ERC-1167 clones of one implementation by Modular7579AccountFactory, which
 * initializes the owner in the same call, so no one can initialize a clone first.
 */
contract Modular7579Account is AccountERC7579, SignerECDSA, Initializable {
    /// The implementation only serves clones: it has no owner and cannot be given one.
    constructor() SignerECDSA(address(0)) {
        _disableInitializers();
    }

    function initialize(address owner) external initializer {
        _setSigner(owner);
    }

    /// OpenZeppelin's default is EntryPoint v0.9; the test chain runs v0.7.
    function entryPoint() public pure override returns (IEntryPoint) {
        return ERC4337Utils.ENTRYPOINT_V07;
    }

    function _rawSignatureValidation(
        bytes32 hash,
        bytes calldata signature
    ) internal view override(AccountERC7579, SignerECDSA) returns (bool) {
        return SignerECDSA._rawSignatureValidation(hash, signature);
    }
}

/**
 * @title Modular7579AccountFactory
 * @notice For tests only: deploys Modular7579Account clones with CREATE2, one address per
 * (owner, salt), as the factory of an operation's factory/factoryData.
 */
contract Modular7579AccountFactory {
    Modular7579Account public immutable accountImplementation;

    constructor() {
        accountImplementation = new Modular7579Account();
    }

    /// Deploys and initializes the account, or returns it if it is already there.
    function createAccount(address owner, uint256 salt) external returns (address account) {
        account = getAddress(owner, salt);
        if (account.code.length > 0) return account;
        Clones.cloneDeterministic(address(accountImplementation), _cloneSalt(owner, salt));
        Modular7579Account(payable(account)).initialize(owner);
    }

    function getAddress(address owner, uint256 salt) public view returns (address) {
        return Clones.predictDeterministicAddress(address(accountImplementation), _cloneSalt(owner, salt));
    }

    /// The owner is part of the CREATE2 salt, so an address can only ever be its owner's account.
    function _cloneSalt(address owner, uint256 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(owner, salt));
    }
}
