// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {_packValidationData} from "@account-abstraction/contracts/core/Helpers.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {UserOperationLib} from "@account-abstraction/contracts/core/UserOperationLib.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/**
 * @title SponsorPaymaster
 * @notice Pays for a user operation when the sponsorship service signed an authorization for it.
 *
 * The authorization (EIP-712 `Sponsorship`) binds one account, one contract, one function, a
 * gas cost ceiling, a validity window and a single-use id. The account, contract and function are
 * not carried in `paymasterAndData`: they are read from the user operation itself and folded into
 * the digest, so an operation that differs from what was signed simply fails the signature check.
 *
 * `paymasterAndData` after the 52 bytes the EntryPoint owns:
 *   maxGasCost (uint128) | validUntil (uint48) | validAfter (uint48) | authId (bytes32) | signature (65)
 *
 * The paymaster reads and writes its own storage during validation (signer, used ids), so under
 * the ERC-7562 rules a public bundler only accepts it once it is staked in the EntryPoint.
 */
contract SponsorPaymaster is BasePaymaster, EIP712 {
    bytes32 public constant SPONSORSHIP_TYPEHASH = keccak256(
        "Sponsorship(address sender,address target,bytes4 selector,uint256 maxGasCost,uint48 validUntil,uint48 validAfter,bytes32 authId)"
    );

    /// SimpleAccount's `execute(address dest, uint256 value, bytes func)`.
    bytes4 private constant EXECUTE_SELECTOR = bytes4(keccak256("execute(address,uint256,bytes)"));

    /// postOp needs about 3,100 gas; with less it reverts, the EntryPoint still charges us, and
    /// no Sponsored log is emitted. The postOp limit is outside the signed fields, so it is
    /// bounded here instead.
    uint256 public constant MIN_POST_OP_GAS_LIMIT = 8_000;
    uint256 private constant MAX_GAS_COST_END = PAYMASTER_DATA_OFFSET + 16;
    uint256 private constant VALID_UNTIL_END = MAX_GAS_COST_END + 6;
    uint256 private constant VALID_AFTER_END = VALID_UNTIL_END + 6;
    uint256 private constant AUTH_ID_END = VALID_AFTER_END + 32;
    uint256 private constant PAYMASTER_AND_DATA_LENGTH = AUTH_ID_END + 65;

    /// The fields of an authorization that travel in `paymasterAndData`.
    struct Authorization {
        uint256 maxGasCost;
        uint48 validUntil;
        uint48 validAfter;
        bytes32 authId;
    }

    address private _signer;

    /// Authorization ids already consumed by a validated operation. An id never becomes free again.
    mapping(bytes32 authId => bool used) public usedAuthIds;

    event SignerChanged(address indexed previousSigner, address indexed newSigner);
    event Sponsored(
        bytes32 indexed authId, bytes32 indexed userOpHash, address indexed sender, uint256 actualGasCost
    );

    error ZeroSigner();
    error MalformedPaymasterData(uint256 length);
    error InvalidWindow(uint48 validAfter, uint48 validUntil);
    error GasCostAboveSponsorship(uint256 maxCost, uint256 maxGasCost);
    error AuthorizationUsed(bytes32 authId);
    error NotExecuteCall();
    error MalformedCallData();
    error MissingSelector();
    error PostOpGasLimitTooLow(uint256 postOpGasLimit, uint256 minimum);

    constructor(IEntryPoint entryPoint_, address signer_) BasePaymaster(entryPoint_) EIP712("SponsorPaymaster", "1") {
        _setSigner(signer_);
    }

    /// @notice The key whose EIP-712 signatures this paymaster honours.
    function signer() external view returns (address) {
        return _signer;
    }

    /// @notice Rotates the signing key. Authorizations signed by the previous key stop validating at once.
    function setSigner(address newSigner) external onlyOwner {
        _setSigner(newSigner);
    }

    /// @notice The full EIP-712 digest the service signs for these fields, in this paymaster's domain.
    function getHash(
        address sender,
        address target,
        bytes4 selector,
        uint256 maxGasCost,
        uint48 validUntil,
        uint48 validAfter,
        bytes32 authId
    ) public view returns (bytes32) {
        bytes32 structHash = keccak256(
            abi.encode(SPONSORSHIP_TYPEHASH, sender, target, selector, maxGasCost, validUntil, validAfter, authId)
        );
        return _hashTypedDataV4(structHash);
    }

    /**
     * Malformed or out-of-policy operations revert with a custom error. A signature that does not
     * come from the signer is reported as SIG_VALIDATION_FAILED together with the window, so the
     * EntryPoint (not this contract) is the single place that enforces time.
     */
    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32 userOpHash, uint256 maxCost)
        internal
        override
        returns (bytes memory context, uint256 validationData)
    {
        bytes calldata paymasterAndData = userOp.paymasterAndData;
        Authorization memory auth = _parseAuthorization(paymasterAndData);
        _requirePostOpGas(paymasterAndData);
        if (maxCost > auth.maxGasCost) revert GasCostAboveSponsorship(maxCost, auth.maxGasCost);
        if (usedAuthIds[auth.authId]) revert AuthorizationUsed(auth.authId);
        usedAuthIds[auth.authId] = true;

        (address target, bytes4 selector) = _executeTarget(userOp.callData);
        bytes32 digest =
            getHash(userOp.sender, target, selector, auth.maxGasCost, auth.validUntil, auth.validAfter, auth.authId);
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, paymasterAndData[AUTH_ID_END:]);
        bool sigFailed = err != ECDSA.RecoverError.NoError || recovered != _signer;

        context = abi.encode(auth.authId, userOpHash, userOp.sender);
        validationData = _packValidationData(sigFailed, auth.validUntil, auth.validAfter);
    }

    /// Runs after execution whether the inner call succeeded or reverted: the gas was paid either way.
    function _postOp(PostOpMode, bytes calldata context, uint256 actualGasCost, uint256) internal override {
        (bytes32 authId, bytes32 userOpHash, address sender) = abi.decode(context, (bytes32, bytes32, address));
        emit Sponsored(authId, userOpHash, sender, actualGasCost);
    }

    function _requirePostOpGas(bytes calldata paymasterAndData) private pure {
        uint256 limit = uint128(bytes16(paymasterAndData[UserOperationLib.PAYMASTER_POSTOP_GAS_OFFSET:PAYMASTER_DATA_OFFSET]));
        if (limit < MIN_POST_OP_GAS_LIMIT) revert PostOpGasLimitTooLow(limit, MIN_POST_OP_GAS_LIMIT);
    }

    function _parseAuthorization(bytes calldata paymasterAndData) private pure returns (Authorization memory auth) {
        if (paymasterAndData.length != PAYMASTER_AND_DATA_LENGTH) {
            revert MalformedPaymasterData(paymasterAndData.length);
        }
        auth.maxGasCost = uint128(bytes16(paymasterAndData[PAYMASTER_DATA_OFFSET:MAX_GAS_COST_END]));
        auth.validUntil = uint48(bytes6(paymasterAndData[MAX_GAS_COST_END:VALID_UNTIL_END]));
        auth.validAfter = uint48(bytes6(paymasterAndData[VALID_UNTIL_END:VALID_AFTER_END]));
        auth.authId = bytes32(paymasterAndData[VALID_AFTER_END:AUTH_ID_END]);
        // The EntryPoint reads validUntil == 0 as "forever"; an authorization always ends.
        if (auth.validUntil <= auth.validAfter) revert InvalidWindow(auth.validAfter, auth.validUntil);
    }

    /**
     * Reads `dest` and the first four bytes of `func` out of `execute(dest, value, func)` calldata,
     * following the same head/tail offsets the account's ABI decoder will follow, so what is
     * checked here is what the account will call.
     */
    function _executeTarget(bytes calldata callData) private pure returns (address target, bytes4 selector) {
        if (callData.length < 100 || bytes4(callData[:4]) != EXECUTE_SELECTOR) revert NotExecuteCall();
        uint256 destWord = uint256(bytes32(callData[4:36]));
        if (destWord >> 160 != 0) revert MalformedCallData();
        target = address(uint160(destWord));

        // The offset of `func` counts from the first argument, just after the 4-byte selector.
        uint256 funcOffset = uint256(bytes32(callData[68:100]));
        if (funcOffset > callData.length || 4 + funcOffset + 32 > callData.length) revert MalformedCallData();
        uint256 funcStart = 4 + funcOffset + 32;
        uint256 funcLength = uint256(bytes32(callData[4 + funcOffset:funcStart]));
        if (funcLength > callData.length - funcStart) revert MalformedCallData();
        if (funcLength < 4) revert MissingSelector();
        selector = bytes4(callData[funcStart:funcStart + 4]);
    }

    function _setSigner(address newSigner) private {
        if (newSigner == address(0)) revert ZeroSigner();
        emit SignerChanged(_signer, newSigner);
        _signer = newSigner;
    }
}
