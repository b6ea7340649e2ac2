import { parseAbi } from "viem";

/**
 * The subset of SponsorPaymaster's (authorization version 3) ABI the TypeScript side uses, typed
 * for viem. Both builds (SponsorPaymaster for EntryPoint v0.7, SponsorPaymasterV08 for v0.8) have
 * every item; v0.8's adds only Ownable2Step's two-step ownership transfer. test/chain/artifacts.test.ts
 * (v0.7) and test/chain/v08-paymaster.test.ts (v0.8) check every item against the compiled ABI.
 */
export const sponsorPaymasterAbi = parseAbi([
  "struct CallSponsorship { address sender; bytes32 senderCodeHash; bytes32 initCodeHash; address target; bytes4 selector; uint256 maxTotalGas; uint256 maxPreVerificationGas; uint256 maxFeePerGas; uint256 maxPriorityFeePerGas; uint256 paymasterVerificationGasLimit; uint256 paymasterPostOpGasLimit; uint48 validUntil; uint48 validAfter; bytes32 authId; }",
  "struct PackedUserOperation { address sender; uint256 nonce; bytes initCode; bytes callData; bytes32 accountGasLimits; uint256 preVerificationGas; bytes32 gasFees; bytes paymasterAndData; bytes signature; }",
  "function signer() view returns (address)",
  "function setSigner(address newSigner)",
  "function rotateSigner(address newSigner, uint48 previousValidUntil)",
  "function previousSigner() view returns (address)",
  "function previousSignerValidUntil() view returns (uint48)",
  "function MAX_PREVIOUS_SIGNER_GRACE() view returns (uint48)",
  "function transferOwnership(address newOwner)",
  "function owner() view returns (address)",
  "function entryPoint() view returns (address)",
  "function getCallHash(CallSponsorship sponsorship) view returns (bytes32)",
  "function getOperationHash(PackedUserOperation userOp, bytes32 senderCodeHash, uint48 validUntil, uint48 validAfter, bytes32 authId) view returns (bytes32)",
  "function userOpHashOf(bytes32 authId) view returns (bytes32)",
  "function usedAuthIds(bytes32 authId) view returns (bool)",
  "function CALL_SPONSORSHIP_TYPEHASH() view returns (bytes32)",
  "function OPERATION_SPONSORSHIP_TYPEHASH() view returns (bytes32)",
  "function MODE_CALL() view returns (uint8)",
  "function MODE_OPERATION() view returns (uint8)",
  "function deposit() payable",
  "function getDeposit() view returns (uint256)",
  "function withdrawTo(address withdrawAddress, uint256 amount)",
  "function addStake(uint32 unstakeDelaySec) payable",
  "function unlockStake()",
  "function withdrawStake(address withdrawAddress)",
  "event SponsorshipUsed(bytes32 indexed authId, bytes32 indexed userOpHash, address indexed sender)",
  "event SignerChanged(address indexed previousSigner, address indexed newSigner)",
  "event PreviousSignerChanged(address indexed previousSigner, uint48 validUntil)",
  "error ZeroSigner()",
  "error SameSigner(address signer)",
  "error InvalidPreviousSignerDeadline(uint48 validUntil, uint48 latestAllowed)",
  "error MalformedPaymasterData(uint256 length)",
  "error InvalidWindow(uint48 validAfter, uint48 validUntil)",
  "error AuthorizationUsed(bytes32 authId)",
  "error NotExecuteCall()",
  "error MalformedCallData()",
  "error MissingSelector()",
  // OpenZeppelin's Ownable (inherited), so that a call by someone else than the owner decodes.
  "error OwnableUnauthorizedAccount(address account)",
  "error OwnableInvalidOwner(address owner)",
]);
