/** The two gas limits of the paymaster's own calls, as they travel in paymasterAndData[20:52]. */
export interface PaymasterGasLimits {
  verificationGasLimit: bigint;
  postOpGasLimit: bigint;
}

/**
 * The limits the service puts in every paymasterAndData, and signs: both authorization modes
 * bind them, so this is the one place they are chosen.
 *
 * Verification: measured on anvil 1.7.1 (its default hardfork) with the real EntryPoint v0.7,
 * SponsorPaymaster v2 built by solc 0.8.37 (optimizer, 10,000 runs), by searching for the
 * smallest limit the EntryPoint accepts (test/support/gas-search.ts) for a SimpleAccount
 * `execute(GameItems.mint(42))`, with a never-used authId, so the single-use write is the cold
 * zero-to-non-zero SSTORE (22,100 gas) plus the cold reads of the signer and the slot:
 *   call authorization (mode 0):      53,075 gas for a first operation (with initCode)
 *   whole-operation (mode 1):         47,312 gas for a first operation
 * and with EntryPoint v0.8 and SponsorPaymasterV08 (same source, same compiler), first operations:
 *   SimpleAccount 0.8:                52,989 (mode 0), 47,474 (mode 1)
 *   Simple7702Account via EIP-7702:   52,983 (mode 0), 47,643 (mode 1: reading the sender's
 *                                     delegation and hashing it costs about 170 more)
 * During a signer rotation an authorization signed by the previous key costs one more cold
 * storage read (the previous key and its deadline): 55,370 (mode 0) and 49,607 (mode 1) on v0.7
 * (test/chain/signer-rotation.test.ts).
 * This is gas as the EntryPoint counts it: the paymaster's own execution plus the EntryPoint
 * encoding the operation for the call. 1 KB more callData adds about 100 (mode 0) and 390
 * (mode 1) gas. 70,000 is the larger figure with about 30% headroom for both EntryPoints (26%
 * for a previous key's authorization), so one pair of limits serves both builds; unused
 * verification gas costs nothing (only the prefund, which is returned), so the margin is cheap.
 * test/chain/paymaster.test.ts (v0.7), v08-paymaster.test.ts (v0.8) and signer-rotation.test.ts
 * (previous key) re-measure and fail if the headroom drops below 20%.
 *
 * Authorization v3 (issue 19) adds the sender's EXTCODEHASH (a warm account by then: 100 gas),
 * 48 more bytes of paymasterAndData (the code hash and, in mode 0, the preVerificationGas
 * ceiling) and three more words to hash: the previous key's call-authorization path measured
 * 59,179 gas, so the limit went from 70,000 to 75,000 (27% headroom there, more everywhere else).
 *
 * postOp: 0. Validation returns an empty context, so the EntryPoint never calls postOp; a
 * non-zero limit would only add to the prefund and to the 10% penalty on unused execution gas.
 */
export const PAYMASTER_GAS_LIMITS: PaymasterGasLimits = {
  verificationGasLimit: 75_000n,
  postOpGasLimit: 0n,
};
