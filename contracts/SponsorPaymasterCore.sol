// SPDX-License-Identifier: GPL-3.0
pragma solidity ^0.8.23;

// Resolved against EntryPoint v0.7's package, or v0.8's in the v0.8 build (see the NatSpec below).
import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {_packValidationData} from "@account-abstraction/contracts/core/Helpers.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {UserOperationLib} from "@account-abstraction/contracts/core/UserOperationLib.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/**
 * @title SponsorPaymasterCore (authorization version 3), shared by every EntryPoint build
 * @notice Pays for a user operation when the sponsorship service signed an authorization for it.
 *
 * The player is treated as an adversary who controls the account's code, every field of the
 * operation and possibly the bundler, so an authorization binds everything that decides what this
 * paymaster pays and what the sponsored operation does. There are two kinds, both EIP-712 in the
 * domain `{name: "SponsorPaymaster", version: "3", chainId, verifyingContract: this}`:
 *
 * - Mode 0, call authorization (`CallSponsorship`): given before the operation exists. It binds the
 *   sender, the code the sender runs (below), its initCode (keccak256 of it as given; of the empty
 *   string when the operation deploys nothing), the contract and function the account calls through
 *   `execute(address,uint256,bytes)`, a ceiling on the operation's total gas and one on its
 *   preVerificationGas, ceilings on `maxFeePerGas` and `maxPriorityFeePerGas`, this paymaster's
 *   own two gas limits, a window and a single-use id. Sender, initCode, target and selector are
 *   read from the operation, not carried.
 *
 *   CallSponsorship(address sender,bytes32 senderCodeHash,bytes32 initCodeHash,address target,
 *     bytes4 selector,uint256 maxTotalGas,uint256 maxPreVerificationGas,uint256 maxFeePerGas,
 *     uint256 maxPriorityFeePerGas,uint256 paymasterVerificationGasLimit,
 *     uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)
 *
 * - Mode 1, whole-operation authorization (`OperationSponsorship`): given for an operation the
 *   service has seen (ERC-7677). It binds every field of the operation except its signature;
 *   byte strings by their keccak256, the paymaster's gas limits as read from `paymasterAndData`.
 *   `initCodeHash` is the initCode's hash as the EntryPoint's own userOpHash takes it: each build
 *   says which (`_operationInitCodeHash`; on v0.8 an EIP-7702 operation binds its delegate).
 *
 *   OperationSponsorship(address sender,bytes32 senderCodeHash,uint256 nonce,bytes32 initCodeHash,
 *     bytes32 callDataHash,bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,
 *     uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,
 *     uint48 validAfter,bytes32 authId)
 *
 * The sender's code. An account does what its code says, not what its callData's selector
 * suggests, so the service decodes calls only for code it knows and signs the hash of that code:
 * `senderCodeHash` is EXTCODEHASH(sender) as the service verified it, and validation refuses the
 * operation unless the sender's code hash is the same when it runs (a signature failure, AA34).
 * For an EIP-7702 account EXTCODEHASH is the hash of its delegation designator
 * (0xef0100 ‖ delegate), so a re-delegation after signing fails here. Zero means "not bound": the
 * service signs it for a counterfactual sender (its initCode, from a factory the service knows,
 * is bound instead) and for projects that opted in to accounts the service does not know. The
 * hash of a proxy covers the proxy only: an implementation swapped behind it after signing is not
 * seen here (the service's README says what bounds that).
 *
 * `paymasterAndData` (byte offsets; integers big-endian):
 *
 *   [0:20)    paymaster address                    (read by the EntryPoint)
 *   [20:36)   paymasterVerificationGasLimit uint128 (read by the EntryPoint, signed)
 *   [36:52)   paymasterPostOpGasLimit uint128       (read by the EntryPoint, signed; 0 in practice)
 *   [52]      mode uint8: 0 = call authorization, 1 = whole-operation authorization
 *   [53:59)   validUntil uint48
 *   [59:65)   validAfter uint48
 *   [65:97)   authId bytes32
 *   [97:129)  senderCodeHash bytes32 (0: not bound)
 *   mode 0 only:
 *   [129:145) maxTotalGas uint128
 *   [145:161) maxPreVerificationGas uint128
 *   [161:177) maxFeePerGas ceiling uint128
 *   [177:193) maxPriorityFeePerGas ceiling uint128
 *   last 65   signature (r, s, v) by `signer()` (or, during a rotation, `previousSigner()`) over
 *             the EIP-712 digest
 *
 * Mode 0 is 258 bytes long and mode 1 is 194; any other length or mode reverts.
 *
 * Outcomes: malformed input reverts with a custom error (the EntryPoint reports AA33). An
 * operation outside its ceilings or not signed by the signer is reported as a failed signature
 * (AA34), so that a bundler estimating gas with a stub and generous limits sees a signature
 * failure instead of a revert. The window is returned to the EntryPoint, which enforces it (AA32).
 *
 * Signer rotation: `rotateSigner(newSigner, previousValidUntil)` makes `newSigner` the signer and
 * keeps the key it replaces accepted until `previousValidUntil`, so that authorizations the
 * service issued with the old key, and that a player may still submit, do not break mid-flight.
 * Validation cannot read the clock (ERC-7562 bans TIMESTAMP for the paymaster), so the deadline is
 * folded into the returned validation data instead: an authorization signed by the previous key
 * comes back with `validUntil = min(its own validUntil, previousValidUntil)` and the EntryPoint
 * refuses it after that (AA32), exactly as it enforces every other window. `setSigner` replaces
 * the key with no grace period and forgets any previous key (for a key that leaked).
 *
 * Attribution: validation records `userOpHashOf[authId] = userOpHash` and emits `SponsorshipUsed`.
 * Both happen in the validation phase, so they stand whatever happens later in the bundle (the
 * call reverts, the EntryPoint takes the whole prefund on its prefund-too-low path) and whichever
 * entry submitted the operation (handleOps, handleAggregatedOps, a contract in between).
 * Validation returns an empty context, so the EntryPoint never calls postOp.
 *
 * The paymaster reads and writes its own storage during validation (signer, used ids), so under
 * the ERC-7562 rules a public bundler only accepts it once it is staked in the EntryPoint.
 *
 * One source, one build per EntryPoint: the imports above name the v0.7 package, and
 * scripts/build-contracts.ts compiles this file a second time with that package's prefix
 * remapped to the v0.8 release (for SponsorPaymasterV08.sol), so both builds run the very same
 * validation on their own BasePaymaster and PackedUserOperation.
 */
abstract contract SponsorPaymasterCore is BasePaymaster, EIP712 {
    /// The fields of a call authorization, in the order of its EIP-712 type.
    struct CallSponsorship {
        address sender;
        bytes32 senderCodeHash;
        bytes32 initCodeHash;
        address target;
        bytes4 selector;
        uint256 maxTotalGas;
        uint256 maxPreVerificationGas;
        uint256 maxFeePerGas;
        uint256 maxPriorityFeePerGas;
        uint256 paymasterVerificationGasLimit;
        uint256 paymasterPostOpGasLimit;
        uint48 validUntil;
        uint48 validAfter;
        bytes32 authId;
    }

    /// What every authorization carries in `paymasterAndData`, whatever its mode.
    struct Terms {
        uint8 mode;
        uint48 validUntil;
        uint48 validAfter;
        bytes32 authId;
        bytes32 senderCodeHash;
    }

    bytes32 public constant CALL_SPONSORSHIP_TYPEHASH = keccak256(
        "CallSponsorship(address sender,bytes32 senderCodeHash,bytes32 initCodeHash,address target,bytes4 selector,uint256 maxTotalGas,uint256 maxPreVerificationGas,uint256 maxFeePerGas,uint256 maxPriorityFeePerGas,uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)"
    );
    bytes32 public constant OPERATION_SPONSORSHIP_TYPEHASH = keccak256(
        "OperationSponsorship(address sender,bytes32 senderCodeHash,uint256 nonce,bytes32 initCodeHash,bytes32 callDataHash,bytes32 accountGasLimits,uint256 preVerificationGas,bytes32 gasFees,uint256 paymasterVerificationGasLimit,uint256 paymasterPostOpGasLimit,uint48 validUntil,uint48 validAfter,bytes32 authId)"
    );

    uint8 public constant MODE_CALL = 0;
    uint8 public constant MODE_OPERATION = 1;

    /// SimpleAccount's `execute(address dest, uint256 value, bytes func)`.
    bytes4 private constant EXECUTE_SELECTOR = bytes4(keccak256("execute(address,uint256,bytes)"));

    uint256 private constant MODE_OFFSET = PAYMASTER_DATA_OFFSET; // 52
    uint256 private constant VALID_UNTIL_OFFSET = MODE_OFFSET + 1; // 53
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6; // 59
    uint256 private constant AUTH_ID_OFFSET = VALID_AFTER_OFFSET + 6; // 65
    uint256 private constant CODE_HASH_OFFSET = AUTH_ID_OFFSET + 32; // 97
    uint256 private constant TERMS_END = CODE_HASH_OFFSET + 32; // 129
    uint256 private constant MAX_TOTAL_GAS_OFFSET = TERMS_END; // 129
    uint256 private constant MAX_PVG_OFFSET = MAX_TOTAL_GAS_OFFSET + 16; // 145
    uint256 private constant MAX_FEE_OFFSET = MAX_PVG_OFFSET + 16; // 161
    uint256 private constant MAX_PRIORITY_FEE_OFFSET = MAX_FEE_OFFSET + 16; // 177
    uint256 private constant CEILINGS_END = MAX_PRIORITY_FEE_OFFSET + 16; // 193
    uint256 private constant SIGNATURE_LENGTH = 65;
    uint256 private constant CALL_DATA_LENGTH = CEILINGS_END + SIGNATURE_LENGTH; // 258
    uint256 private constant OPERATION_DATA_LENGTH = TERMS_END + SIGNATURE_LENGTH; // 194

    /// The longest a replaced key may stay accepted: the service's validity windows last an hour
    /// at most, so a day is ample, and a deadline in milliseconds or years is refused as a mistake.
    uint48 public constant MAX_PREVIOUS_SIGNER_GRACE = 1 days;

    address private _signer;

    /// The key `rotateSigner` replaced and the last second (inclusive) its signatures are honoured.
    /// Packed in one slot: validation reads it only when a signature is not the current signer's.
    struct PreviousSigner {
        address signer;
        uint48 validUntil;
    }

    PreviousSigner private _previous;

    /// The operation that consumed each authorization id; zero while unused. An id never becomes free again.
    mapping(bytes32 authId => bytes32 userOpHash) public userOpHashOf;

    event SignerChanged(address indexed previousSigner, address indexed newSigner);
    /// The replaced key still accepted, and until when; (0, 0) once `setSigner` forgot it.
    event PreviousSignerChanged(address indexed previousSigner, uint48 validUntil);
    /// Emitted during validation: authorization `authId` pays for operation `userOpHash` of `sender`.
    event SponsorshipUsed(bytes32 indexed authId, bytes32 indexed userOpHash, address indexed sender);

    error ZeroSigner();
    error SameSigner(address signer);
    error InvalidPreviousSignerDeadline(uint48 validUntil, uint48 latestAllowed);
    error MalformedPaymasterData(uint256 length);
    error InvalidWindow(uint48 validAfter, uint48 validUntil);
    error AuthorizationUsed(bytes32 authId);
    error NotExecuteCall();
    error MalformedCallData();
    error MissingSelector();

    constructor(IEntryPoint entryPoint_, address signer_) BasePaymaster(entryPoint_) EIP712("SponsorPaymaster", "3") {
        _setSigner(signer_);
    }

    /// @notice The key whose EIP-712 signatures this paymaster honours.
    function signer() external view returns (address) {
        return _signer;
    }

    /// @notice The key `rotateSigner` replaced; still accepted until `previousSignerValidUntil()`.
    function previousSigner() external view returns (address) {
        return _previous.signer;
    }

    /// @notice The last block timestamp at which a signature by `previousSigner()` is honoured (0: none).
    function previousSignerValidUntil() external view returns (uint48) {
        return _previous.validUntil;
    }

    /**
     * @notice Replaces the signing key at once: authorizations signed by the current key, and by
     * any previous key still in its grace period, stop validating immediately. For a key that
     * leaked; a planned rotation uses `rotateSigner`.
     */
    function setSigner(address newSigner) external onlyOwner {
        _setSigner(newSigner);
        if (_previous.signer != address(0) || _previous.validUntil != 0) _setPrevious(address(0), 0);
    }

    /**
     * @notice Replaces the signing key and keeps the replaced one accepted until `previousValidUntil`
     * (a block timestamp, inclusive, at most `MAX_PREVIOUS_SIGNER_GRACE` from now), so that the
     * authorizations it already signed still run. Set it to at least now + the longest validity
     * window the service issues + the time it takes to restart the service with the new key.
     * A key replaced earlier and still in its grace period is forgotten.
     */
    function rotateSigner(address newSigner, uint48 previousValidUntil) external onlyOwner {
        address current = _signer;
        if (newSigner == current) revert SameSigner(newSigner);
        // The only use of the clock, outside validation: the deadline must lie ahead, and not far.
        uint48 latestAllowed = uint48(block.timestamp) + MAX_PREVIOUS_SIGNER_GRACE;
        if (previousValidUntil <= block.timestamp || previousValidUntil > latestAllowed) {
            revert InvalidPreviousSignerDeadline(previousValidUntil, latestAllowed);
        }
        _setSigner(newSigner);
        _setPrevious(current, previousValidUntil);
    }

    /// @notice Whether an authorization id was consumed (kept from version 1; see `userOpHashOf`).
    function usedAuthIds(bytes32 authId) external view returns (bool) {
        return userOpHashOf[authId] != bytes32(0);
    }

    /// @notice The full EIP-712 digest of a call authorization (mode 0) in this paymaster's domain.
    function getCallHash(CallSponsorship calldata sponsorship) external view returns (bytes32) {
        return _hashTypedDataV4(_callStructHash(sponsorship));
    }

    /**
     * @notice The full EIP-712 digest of a whole-operation authorization (mode 1) for `userOp`.
     * The paymaster's gas limits are read from `userOp.paymasterAndData[20:52]`; its signature and
     * the rest of `paymasterAndData` are not part of the digest.
     */
    function getOperationHash(
        PackedUserOperation calldata userOp,
        bytes32 senderCodeHash,
        uint48 validUntil,
        uint48 validAfter,
        bytes32 authId
    ) external view returns (bytes32) {
        if (userOp.paymasterAndData.length < PAYMASTER_DATA_OFFSET) {
            revert MalformedPaymasterData(userOp.paymasterAndData.length);
        }
        Terms memory terms = Terms({
            mode: MODE_OPERATION,
            validUntil: validUntil,
            validAfter: validAfter,
            authId: authId,
            senderCodeHash: senderCodeHash
        });
        return _hashTypedDataV4(_operationStructHash(userOp, terms));
    }

    /**
     * The `initCodeHash` a whole-operation authorization binds: the hash of the initCode exactly as
     * this build's EntryPoint puts it into the userOpHash, so that what the service signed and what
     * the account signed describe the same deployment (or, on v0.8, the same EIP-7702 delegate).
     */
    function _operationInitCodeHash(PackedUserOperation calldata userOp) internal view virtual returns (bytes32);

    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32 userOpHash, uint256)
        internal
        override
        returns (bytes memory context, uint256 validationData)
    {
        bytes calldata paymasterAndData = userOp.paymasterAndData;
        Terms memory terms = _parseTerms(paymasterAndData);

        // Consume the id and record the link before anything can fail softly: a refused operation
        // makes the EntryPoint revert the whole bundle, which undoes both.
        if (userOpHashOf[terms.authId] != bytes32(0)) revert AuthorizationUsed(terms.authId);
        userOpHashOf[terms.authId] = userOpHash;
        emit SponsorshipUsed(terms.authId, userOpHash, userOp.sender);

        bytes32 digest;
        bool withinCeilings = true;
        if (terms.mode == MODE_CALL) {
            CallSponsorship memory sponsorship = _callSponsorshipOf(userOp, terms);
            withinCeilings = _withinCeilings(userOp, sponsorship);
            digest = _hashTypedDataV4(_callStructHash(sponsorship));
        } else {
            digest = _hashTypedDataV4(_operationStructHash(userOp, terms));
        }

        // The code the service verified is the code that runs. EXTCODEHASH of the sender is
        // allowed to a paymaster under ERC-7562 (the sender exists by now: an initCode has just
        // deployed it, a 7702 authorization has just delegated it).
        bool sameCode = terms.senderCodeHash == bytes32(0) || userOp.sender.codehash == terms.senderCodeHash;

        bytes calldata signature = paymasterAndData[paymasterAndData.length - SIGNATURE_LENGTH:];
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, signature);
        (bool signed, uint48 validUntil) = _signedBy(recovered, terms.validUntil);
        bool sigFailed = !withinCeilings || !sameCode || err != ECDSA.RecoverError.NoError || !signed;

        // An empty context tells the EntryPoint not to call postOp: nothing is left to do after execution.
        context = "";
        validationData = _packValidationData(sigFailed, validUntil, terms.validAfter);
    }

    /**
     * Whether `recovered` is a key this paymaster honours, and the validUntil to return for it: the
     * authorization's own for the current signer; for the previous signer the earlier of that and
     * the previous key's deadline, which the EntryPoint then enforces (no TIMESTAMP here). Both
     * deadlines are non-zero (an authorization's window is checked in _parseTerms, a rotation's
     * in rotateSigner), so the minimum never becomes the EntryPoint's "0 = forever".
     */
    function _signedBy(address recovered, uint48 validUntil) private view returns (bool, uint48) {
        if (recovered == _signer) return (true, validUntil);
        PreviousSigner memory previous = _previous;
        if (previous.signer == address(0) || recovered != previous.signer) return (false, validUntil);
        return (true, validUntil < previous.validUntil ? validUntil : previous.validUntil);
    }

    /// Checks the length against the mode and the window; the EntryPoint owns bytes [0:52).
    function _parseTerms(bytes calldata paymasterAndData) private pure returns (Terms memory terms) {
        uint256 length = paymasterAndData.length;
        if (length <= MODE_OFFSET) revert MalformedPaymasterData(length);
        terms.mode = uint8(paymasterAndData[MODE_OFFSET]);
        if (terms.mode == MODE_CALL) {
            if (length != CALL_DATA_LENGTH) revert MalformedPaymasterData(length);
        } else if (terms.mode == MODE_OPERATION) {
            if (length != OPERATION_DATA_LENGTH) revert MalformedPaymasterData(length);
        } else {
            revert MalformedPaymasterData(length);
        }
        terms.validUntil = uint48(bytes6(paymasterAndData[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        terms.validAfter = uint48(bytes6(paymasterAndData[VALID_AFTER_OFFSET:AUTH_ID_OFFSET]));
        terms.authId = bytes32(paymasterAndData[AUTH_ID_OFFSET:CODE_HASH_OFFSET]);
        terms.senderCodeHash = bytes32(paymasterAndData[CODE_HASH_OFFSET:TERMS_END]);
        // The EntryPoint reads validUntil == 0 as "forever"; an authorization always ends.
        if (terms.validUntil <= terms.validAfter) revert InvalidWindow(terms.validAfter, terms.validUntil);
    }

    /// The call authorization this operation would need: what it does, and the ceilings it carries.
    function _callSponsorshipOf(PackedUserOperation calldata userOp, Terms memory terms)
        private
        pure
        returns (CallSponsorship memory s)
    {
        bytes calldata paymasterAndData = userOp.paymasterAndData;
        (s.target, s.selector) = _executeTarget(userOp.callData);
        s.sender = userOp.sender;
        s.senderCodeHash = terms.senderCodeHash;
        s.initCodeHash = keccak256(userOp.initCode);
        s.maxTotalGas = uint128(bytes16(paymasterAndData[MAX_TOTAL_GAS_OFFSET:MAX_PVG_OFFSET]));
        s.maxPreVerificationGas = uint128(bytes16(paymasterAndData[MAX_PVG_OFFSET:MAX_FEE_OFFSET]));
        s.maxFeePerGas = uint128(bytes16(paymasterAndData[MAX_FEE_OFFSET:MAX_PRIORITY_FEE_OFFSET]));
        s.maxPriorityFeePerGas = uint128(bytes16(paymasterAndData[MAX_PRIORITY_FEE_OFFSET:CEILINGS_END]));
        (s.paymasterVerificationGasLimit, s.paymasterPostOpGasLimit) = _paymasterGasLimits(paymasterAndData);
        s.validUntil = terms.validUntil;
        s.validAfter = terms.validAfter;
        s.authId = terms.authId;
    }

    /**
     * The EntryPoint's prefund is every gas limit times maxFeePerGas, so bounding the sum of the
     * limits and the fee bounds what this paymaster can be charged. preVerificationGas has a
     * ceiling of its own because it is charged in full whatever the operation uses: without one,
     * a player who is their own bundler moves the unused part of a generous gas ceiling there and
     * keeps it. The EntryPoint has already refused any of these values above 2^120, so the sum
     * cannot overflow.
     */
    function _withinCeilings(PackedUserOperation calldata userOp, CallSponsorship memory s)
        private
        pure
        returns (bool)
    {
        (uint256 verificationGasLimit, uint256 callGasLimit) = UserOperationLib.unpackUints(userOp.accountGasLimits);
        (uint256 maxPriorityFeePerGas, uint256 maxFeePerGas) = UserOperationLib.unpackUints(userOp.gasFees);
        uint256 totalGas = verificationGasLimit + callGasLimit + userOp.preVerificationGas
            + s.paymasterVerificationGasLimit + s.paymasterPostOpGasLimit;
        return totalGas <= s.maxTotalGas && userOp.preVerificationGas <= s.maxPreVerificationGas
            && maxFeePerGas <= s.maxFeePerGas
            && maxPriorityFeePerGas <= s.maxPriorityFeePerGas;
    }

    function _callStructHash(CallSponsorship memory s) private pure returns (bytes32) {
        // Three parts keep the expression within the legacy code generator's stack; the
        // concatenation of static encodings is the encoding of all fifteen words.
        return keccak256(
            bytes.concat(
                abi.encode(CALL_SPONSORSHIP_TYPEHASH, s.sender, s.senderCodeHash, s.initCodeHash, s.target),
                abi.encode(s.selector, s.maxTotalGas, s.maxPreVerificationGas, s.maxFeePerGas),
                abi.encode(
                    s.maxPriorityFeePerGas,
                    s.paymasterVerificationGasLimit,
                    s.paymasterPostOpGasLimit,
                    s.validUntil,
                    s.validAfter,
                    s.authId
                )
            )
        );
    }

    function _operationStructHash(PackedUserOperation calldata userOp, Terms memory terms)
        private
        view
        returns (bytes32)
    {
        (uint256 verificationGasLimit, uint256 postOpGasLimit) = _paymasterGasLimits(userOp.paymasterAndData);
        return keccak256(
            bytes.concat(
                abi.encode(
                    OPERATION_SPONSORSHIP_TYPEHASH,
                    userOp.sender,
                    terms.senderCodeHash,
                    userOp.nonce,
                    _operationInitCodeHash(userOp),
                    keccak256(userOp.callData),
                    userOp.accountGasLimits,
                    userOp.preVerificationGas
                ),
                abi.encode(
                    userOp.gasFees, verificationGasLimit, postOpGasLimit, terms.validUntil, terms.validAfter, terms.authId
                )
            )
        );
    }

    function _paymasterGasLimits(bytes calldata paymasterAndData)
        private
        pure
        returns (uint256 verificationGasLimit, uint256 postOpGasLimit)
    {
        verificationGasLimit = uint128(bytes16(paymasterAndData[PAYMASTER_VALIDATION_GAS_OFFSET:PAYMASTER_POSTOP_GAS_OFFSET]));
        postOpGasLimit = uint128(bytes16(paymasterAndData[PAYMASTER_POSTOP_GAS_OFFSET:PAYMASTER_DATA_OFFSET]));
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

    function _setPrevious(address previous, uint48 validUntil) private {
        _previous = PreviousSigner({signer: previous, validUntil: validUntil});
        emit PreviousSignerChanged(previous, validUntil);
    }
}
