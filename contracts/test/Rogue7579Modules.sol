// SPDX-License-Identifier: MIT
pragma solidity ^0.8.27;

// OpenZeppelin Contracts 5.7 under its npm alias, as in Modular7579Account.sol (no remapping).
import {
    IERC7579Execution,
    IERC7579Hook,
    IERC7579Module,
    MODULE_TYPE_EXECUTOR,
    MODULE_TYPE_FALLBACK,
    MODULE_TYPE_HOOK
} from "@openzeppelin/contracts-v5x/interfaces/draft-IERC7579.sol";
import {IEntryPoint} from "@openzeppelin/contracts-v5x/interfaces/IERC4337.sol";
import {AccountERC7579} from "@openzeppelin/contracts-v5x/account/extensions/draft-AccountERC7579.sol";
import {AccountERC7579Hooked} from "@openzeppelin/contracts-v5x/account/extensions/draft-AccountERC7579Hooked.sol";
import {ERC4337Utils} from "@openzeppelin/contracts-v5x/account/utils/ERC4337Utils.sol";
import {SignerECDSA} from "@openzeppelin/contracts-v5x/utils/cryptography/signers/SignerECDSA.sol";

/// GameItems' `mint(uint256)`, the one call these modules make.
interface IMintable7579 {
    function mint(uint256 itemId) external;
}

/// What both rogue modules share: the contract they mint on, installed and removed with no setup.
abstract contract LootModule is IERC7579Module {
    uint256 public constant LOOT_ITEM_ID = 7;
    address public immutable loot;

    constructor(address loot_) {
        loot = loot_;
    }

    function onInstall(bytes calldata) external {}

    function onUninstall(bytes calldata) external {}
}

/**
 * @title FallbackExecutorModule
 * @notice For tests only: an ERC-7579 module a player installs on a stock AccountERC7579 both as
 * the fallback handler of SimpleAccount's selector `execute(address,uint256,bytes)` (0xb61d27f6,
 * which AccountERC7579 does not have) and as an executor. The account forwards such a call here;
 * the module ignores its arguments and has the account mint on `loot` through
 * `executeFromExecutor`. Code that reads the callData as SimpleAccount's `execute` sees the call
 * the player wrote; the account makes this one.
 */
contract FallbackExecutorModule is LootModule {
    constructor(address loot_) LootModule(loot_) {}

    function isModuleType(uint256 moduleTypeId) external pure returns (bool) {
        return moduleTypeId == MODULE_TYPE_FALLBACK || moduleTypeId == MODULE_TYPE_EXECUTOR;
    }

    /// The account calls this for 0xb61d27f6 (ERC-2771 style: the original caller appended).
    fallback() external {
        // ERC-7579 single execution: target ‖ value ‖ callData, packed.
        bytes memory execution =
            abi.encodePacked(loot, uint256(0), abi.encodeCall(IMintable7579.mint, (LOOT_ITEM_ID)));
        IERC7579Execution(msg.sender).executeFromExecutor(bytes32(0), execution);
    }
}

/**
 * @title PreCheckHook
 * @notice For tests only: an ERC-7579 hook module whose `preCheck`, which the account calls before
 * every execution, mints on `loot` itself, whatever the execution is.
 */
contract PreCheckHook is LootModule, IERC7579Hook {
    constructor(address loot_) LootModule(loot_) {}

    function isModuleType(uint256 moduleTypeId) external pure returns (bool) {
        return moduleTypeId == MODULE_TYPE_HOOK;
    }

    function preCheck(address, uint256, bytes calldata) external returns (bytes memory) {
        IMintable7579(loot).mint(LOOT_ITEM_ID);
        return "";
    }

    function postCheck(bytes calldata) external {}
}

/**
 * @title Hooked7579Account
 * @notice For tests only: OpenZeppelin 5.7's AccountERC7579Hooked (AccountERC7579 with one hook
 * module) with one ECDSA owner, for EntryPoint v0.7, built like Modular7579Account but deployed
 * directly (its owner set by the constructor).
 */
contract Hooked7579Account is AccountERC7579Hooked, SignerECDSA {
    constructor(address owner) SignerECDSA(owner) {}

    /// OpenZeppelin's default is EntryPoint v0.9; the test chain runs v0.7.
    function entryPoint() public pure override returns (IEntryPoint) {
        return ERC4337Utils.ENTRYPOINT_V07;
    }

    function _rawSignatureValidation(bytes32 hash, bytes calldata signature)
        internal
        view
        override(AccountERC7579, SignerECDSA)
        returns (bool)
    {
        return SignerECDSA._rawSignatureValidation(hash, signature);
    }
}
