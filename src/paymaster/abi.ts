import { parseAbi } from "viem";

/**
 * The subset of SponsorPaymaster's ABI the TypeScript side uses, typed for viem.
 * test/chain/artifacts.test.ts checks that every item matches the compiled contract.
 */
export const sponsorPaymasterAbi = parseAbi([
  "function signer() view returns (address)",
  "function setSigner(address newSigner)",
  "function owner() view returns (address)",
  "function entryPoint() view returns (address)",
  "function getHash(address sender, address target, bytes4 selector, uint256 maxGasCost, uint48 validUntil, uint48 validAfter, bytes32 authId) view returns (bytes32)",
  "function usedAuthIds(bytes32 authId) view returns (bool)",
  "function deposit() payable",
  "function getDeposit() view returns (uint256)",
  "function addStake(uint32 unstakeDelaySec) payable",
  "event Sponsored(bytes32 indexed authId, bytes32 indexed userOpHash, address indexed sender, uint256 actualGasCost)",
  "event SignerChanged(address indexed previousSigner, address indexed newSigner)",
  "error ZeroSigner()",
  "error MalformedPaymasterData(uint256 length)",
  "error InvalidWindow(uint48 validAfter, uint48 validUntil)",
  "error GasCostAboveSponsorship(uint256 maxCost, uint256 maxGasCost)",
  "error AuthorizationUsed(bytes32 authId)",
  "error NotExecuteCall()",
  "error MalformedCallData()",
  "error MissingSelector()",
  "error PostOpGasLimitTooLow(uint256 postOpGasLimit, uint256 minimum)",
  "function MIN_POST_OP_GAS_LIMIT() view returns (uint256)",
]);
