/**
 * Shared setup of the attack tests (test/chain/attack-*.test.ts, issue 19): a player who controls
 * their account's code, its factory, its EIP-7702 delegate or its ERC-7579 modules tries to make
 * the studio pay for a call the allowlist does not name. Each attack contract
 * (contracts/test/LyingAccount.sol, SideEffectFactory.sol, Rogue7579Modules.sol) mints item 7 on
 * `decoy`, a second GameItems no project allowlists, so "a non-allowlisted call landed" is one
 * number: the ItemMinted logs `decoy` ever emitted.
 *
 * Two projects share one chain and one service, both allowlisting only `mint` on the stack's
 * GameItems: `defended` keeps the default (`refuse` unknown accounts), `capsOnly` opts in to
 * unknown accounts bound by cost caps alone, which is what every project got before the fix, so
 * the same attack landing there shows it is real and that the defence is what stops it.
 *
 * The player is their own bundler (wallet 3): operations go straight to the EntryPoint's
 * handleOps, no Alto.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  type Address,
  concatHex,
  encodeFunctionData,
  getAddress,
  type Hex,
  type LocalAccount,
  numberToHex,
  parseAbi,
  parseEther,
  type SignedAuthorization,
} from "viem";
import type { PackedUserOperation } from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { creditDeposit } from "../../../src/ledger/ledger.ts";
import type { CallAuthorization } from "../../../src/paymaster/digest.ts";
import { PAYMASTER_GAS_LIMITS } from "../../../src/paymaster/gas.ts";
import {
  encodeCallPaymasterAndData,
  encodeOperationPaymasterAndData,
  type PaymasterMode,
  ZERO_HASH,
} from "../../../src/paymaster/layout.ts";
import { feeCeilings } from "../../../src/sponsor/pricing.ts";
import { seedProject, TEST_SIGNER_KEY, type TestApp } from "../app.ts";
import {
  allowlist,
  MINT_SELECTOR,
  mintCall,
  type Project,
  type ServiceOnChain,
  sponsorUnknownAccounts,
  startServiceOnChain,
  totalGas,
} from "../chain-service.ts";
import {
  latestTimestampSec,
  randomAuthId,
  signCallAuthorization,
  signOperationAuthorization,
} from "../userop.ts";
import { DEVNET_CHAIN_ID, type DevChain, type DevWalletClient } from "./anvil.ts";
import { type CompiledArtifact, type DevnetStack, gameItemsAbi } from "./devnet.ts";
import {
  buildUserOp,
  devnetUserOpGas,
  executeCallData,
  type FailedOp,
  failedOpOf,
  getAccountNonce,
  handleOps,
  packUint128Pair,
  signUserOp,
  simulateHandleOps,
  type UserOpGas,
  type UserOpSignatureScheme,
} from "./userop.ts";

/** The item every attack contract mints on the decoy. */
export const LOOT_ITEM_ID = 7n;

/** The contracts of contracts/test/ the attack tests deploy (built by `npm run build:contracts`). */
export type AttackContractName =
  | "GameItems"
  | "LyingAccount"
  | "LyingDelegate"
  | "SideEffectFactory"
  | "FallbackExecutorModule"
  | "PreCheckHook"
  | "Hooked7579Account";

export function attackArtifact(name: AttackContractName): CompiledArtifact {
  const url = new URL(`../../../contracts/artifacts/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8"));
}

/** Deploys one of them from wallet 0. */
export async function deployAttackContract(
  chain: DevChain,
  name: AttackContractName,
  args: readonly unknown[] = [],
): Promise<Address> {
  const { abi, bytecode } = attackArtifact(name);
  const hash = await chain.wallets[0]!.deployContract({ abi, bytecode, args });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success", `${name} deployment reverted`);
  return getAddress(receipt.contractAddress!);
}

export interface AttackKit extends ServiceOnChain {
  /** A second GameItems: every attack mints here, and no project allowlists it. */
  decoy: Address;
  /** Default settings: unknown account code is refused. */
  defended: Project;
  /** Opted in to unknown accounts on cost caps alone (what every project had before issue 19). */
  capsOnly: Project;
  /** The player, as their own bundler and beneficiary. */
  bundler: DevWalletClient;
}

export async function startAttackKit(): Promise<AttackKit> {
  const service = await startServiceOnChain({ confirmations: 0 });
  const { chain, stack, t } = service;
  const decoy = await deployAttackContract(chain, "GameItems");
  const defended = await fundedProject(t, stack, "defended");
  const capsOnly = await fundedProject(t, stack, "caps-only");
  await sponsorUnknownAccounts(t, capsOnly);
  return { ...service, decoy, defended, capsOnly, bundler: chain.wallets[3]! };
}

async function fundedProject(t: TestApp, stack: DevnetStack, name: string): Promise<Project> {
  const p = await seedProject(t, { email: `${name}@example.com` });
  await allowlist(t, p, stack.gameItems, MINT_SELECTOR);
  await creditDeposit(t.db, {
    projectId: p.projectId,
    reference: `attack:${name}`,
    amountWei: parseEther("5"),
  });
  return p;
}

/** How many items the decoy ever minted, to anyone: a non-allowlisted call that landed. */
export async function decoyMints(kit: Pick<AttackKit, "chain" | "decoy">): Promise<number> {
  const logs = await kit.chain.publicClient.getContractEvents({
    address: kit.decoy,
    abi: gameItemsAbi,
    eventName: "ItemMinted",
    fromBlock: 0n,
  });
  return logs.length;
}

/** Sponsorships the service recorded for a project (a refusal records none). */
export async function sponsorshipCount(t: TestApp, p: Project): Promise<number> {
  const [row] = await t.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM sponsorships WHERE project_id = $1",
    [p.projectId],
  );
  return row!.n;
}

/**
 * An operation before it is sponsored and signed, in the fields ERC-7677's JSON-RPC form names:
 * enough to ask either mode and to pack it afterwards.
 */
export interface DraftOp {
  sender: Address;
  nonce: bigint;
  /** A factory address, the EIP-7702 marker `0x7702`, or none for a deployed sender. */
  factory?: Hex;
  factoryData?: Hex;
  callData: Hex;
  gas: UserOpGas;
  /** EIP-7702: the authorization the bundle carries (its delegate goes in eip7702Auth). */
  eip7702Auth?: SignedAuthorization;
}

export function initCodeOf(op: Pick<DraftOp, "factory" | "factoryData">): Hex {
  return op.factory ? concatHex([op.factory, op.factoryData ?? "0x"]) : "0x";
}

/** A draft calling `execute(gameItems, 0, mint(7))`, the call every project allowlists, at the market's fees. */
export async function draftOp(
  kit: Pick<AttackKit, "chain" | "stack" | "t">,
  over: Partial<DraftOp> & { sender: Address; entryPoint?: Address },
): Promise<DraftOp> {
  const { entryPoint = kit.stack.entryPoint, ...fields } = over;
  return {
    nonce: await getAccountNonce(kit.chain.publicClient, entryPoint, over.sender),
    callData: executeCallData(kit.stack.gameItems, mintCall),
    // preVerificationGas within the service's ceiling for an operation of this size (about 58k).
    gas: { ...devnetUserOpGas, preVerificationGas: 50_000n, ...marketFees(kit.t) },
    ...fields,
  };
}

/** The fee ceilings the service would sign now: an operation at them is within every check. */
export function marketFees(t: TestApp): Pick<UserOpGas, "maxFeePerGas" | "maxPriorityFeePerGas"> {
  const reading = t.services.feeOracle.current(DEVNET_CHAIN_ID);
  const chain = t.config.chains.find((c) => c.chainId === DEVNET_CHAIN_ID);
  assert.ok(reading.kind === "fresh" && chain, "the fee oracle has a fresh reading");
  const c = feeCeilings(reading.fees, chain);
  return { maxFeePerGas: c.maxFeePerGasWei, maxPriorityFeePerGas: c.maxPriorityFeePerGasWei };
}

/** What either endpoint answered: the paymasterAndData to use, or the refusal's stable code. */
export type Sponsorship =
  | { kind: "sponsored"; paymasterAndData: Hex }
  /** `status` is the HTTP status of /sponsor/authorize's problem+json, null for /rpc (always 200). */
  | { kind: "refused"; code: string; detail: string; status: number | null };

/** The paymasterAndData of a sponsorship that must have been given. */
export function sponsoredData(s: Sponsorship): Hex {
  assert.ok(s.kind === "sponsored", s.kind === "refused" ? `refused: ${s.code}: ${s.detail}` : "");
  return s.paymasterAndData;
}

/** Either way in: mode 0 on /sponsor/authorize (EntryPoint v0.7 only), mode 1 on /rpc. */
export function askSponsorship(
  kit: Pick<AttackKit, "t" | "stack">,
  p: Project,
  op: DraftOp,
  mode: PaymasterMode,
  entryPoint: Address = kit.stack.entryPoint,
): Promise<Sponsorship> {
  return mode === "call"
    ? askCallAuthorization(kit, p, op)
    : askOperationAuthorization(kit, p, op, entryPoint);
}

/**
 * The defence at the service: `ask` is refused as account_not_supported (403 on the REST API),
 * nothing is reserved or recorded for the project, and the decoy does not mint.
 */
export async function assertAccountNotSupported(
  kit: Pick<AttackKit, "t" | "chain" | "decoy">,
  p: Project,
  ask: () => Promise<Sponsorship>,
): Promise<void> {
  const state = async () => ({
    mints: await decoyMints(kit),
    sponsorships: await sponsorshipCount(kit.t, p),
  });
  const before = await state();
  const answer = await ask();
  assert.ok(answer.kind === "refused", "the service signed it");
  assert.equal(answer.code, "account_not_supported", answer.detail);
  if (answer.status !== null) assert.equal(answer.status, 403);
  assert.deepEqual(await state(), before, "nothing was reserved and the decoy never minted");
}

/**
 * Mode 0: POST /sponsor/authorize for the draft's sender, allowlisted call and initCode. The
 * draft's gas is fitted to the authorization (preVerificationGas to its ceiling, fees to its).
 */
export async function askCallAuthorization(
  kit: Pick<AttackKit, "t" | "stack">,
  p: Project,
  op: DraftOp,
): Promise<Sponsorship> {
  const initCode = initCodeOf(op);
  const res = await kit.t.request({
    method: "POST",
    url: "/sponsor/authorize",
    token: p.apiKey,
    payload: {
      projectId: p.projectId,
      user: op.sender,
      target: kit.stack.gameItems,
      selector: MINT_SELECTOR,
      estimatedGas: Number(totalGas(op.gas)),
      chainId: DEVNET_CHAIN_ID,
      ...(initCode === "0x" ? {} : { initCode }),
    },
  });
  if (res.statusCode !== 200) {
    assert.match(String(res.headers["content-type"]), /application\/problem\+json/);
    const problem = res.json() as { code: string; detail: string; status: number };
    return { kind: "refused", code: problem.code, detail: problem.detail, status: res.statusCode };
  }
  const auth = res.json() as {
    paymasterAndData: Hex;
    maxFeePerGas: string;
    maxPriorityFeePerGas: string;
    maxPreVerificationGas?: string;
  };
  const pvgCeiling =
    auth.maxPreVerificationGas === undefined ? op.gas.preVerificationGas : BigInt(auth.maxPreVerificationGas);
  op.gas = {
    ...op.gas,
    preVerificationGas: op.gas.preVerificationGas < pvgCeiling ? op.gas.preVerificationGas : pvgCeiling,
    maxFeePerGas: BigInt(auth.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(auth.maxPriorityFeePerGas),
  };
  return { kind: "sponsored", paymasterAndData: auth.paymasterAndData };
}

/** The draft in ERC-7677's JSON-RPC form (EntryPoint v0.7/v0.8 unpacked fields, hex quantities). */
export function rpcUserOperation(op: DraftOp): Record<string, unknown> {
  const q = (n: bigint) => numberToHex(n);
  const auth = op.eip7702Auth;
  return {
    sender: op.sender,
    nonce: q(op.nonce),
    ...(op.factory ? { factory: op.factory, factoryData: op.factoryData ?? "0x" } : {}),
    callData: op.callData,
    callGasLimit: q(op.gas.callGasLimit),
    verificationGasLimit: q(op.gas.verificationGasLimit),
    preVerificationGas: q(op.gas.preVerificationGas),
    maxFeePerGas: q(op.gas.maxFeePerGas),
    maxPriorityFeePerGas: q(op.gas.maxPriorityFeePerGas),
    ...(auth
      ? {
          eip7702Auth: {
            address: auth.address,
            chainId: q(BigInt(auth.chainId)),
            nonce: q(BigInt(auth.nonce)),
            r: auth.r,
            s: auth.s,
            yParity: q(BigInt(auth.yParity ?? 0)),
          },
        }
      : {}),
  };
}

/** Mode 1: pm_getPaymasterData on POST /rpc for the whole draft. */
export async function askOperationAuthorization(
  kit: Pick<AttackKit, "t">,
  p: Project,
  op: DraftOp,
  entryPoint: Address,
): Promise<Sponsorship> {
  const res = await kit.t.request({
    method: "POST",
    url: "/rpc",
    token: p.apiKey,
    headers: { "content-type": "application/json" },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "pm_getPaymasterData",
      params: [rpcUserOperation(op), entryPoint, numberToHex(DEVNET_CHAIN_ID), {}],
    }),
  });
  assert.equal(res.statusCode, 200, res.body);
  const body = res.json() as {
    result?: { paymaster: Address; paymasterData: Hex };
    error?: { message: string; data: { code: string } };
  };
  if (body.error) {
    return { kind: "refused", code: body.error.data.code, detail: body.error.message, status: null };
  }
  assert.ok(body.result, res.body);
  // The final result carries no gas limits (ERC-7677: the stub's stand); the service signs its fixed ones.
  const limits = packUint128Pair(
    PAYMASTER_GAS_LIMITS.verificationGasLimit,
    PAYMASTER_GAS_LIMITS.postOpGasLimit,
  );
  return {
    kind: "sponsored",
    paymasterAndData: concatHex([body.result.paymaster, limits, body.result.paymasterData]),
  };
}

/** The operation as the EntryPoint takes it, signed by the account's key. */
export async function signDraft(
  chain: DevChain,
  entryPoint: Address,
  signer: LocalAccount,
  op: DraftOp,
  paymasterAndData: Hex,
  scheme: UserOpSignatureScheme,
): Promise<PackedUserOperation> {
  const unsigned = buildUserOp({
    sender: op.sender,
    nonce: op.nonce,
    initCode: initCodeOf(op),
    callData: op.callData,
    gas: op.gas,
    paymasterAndData,
  });
  const eip7702Delegate = op.factory === "0x7702" ? op.eip7702Auth?.address : undefined;
  const { userOp } = await signUserOp(chain.publicClient, entryPoint, signer, unsigned, {
    scheme,
    eip7702Delegate,
  });
  return userOp;
}

/**
 * The player's bundle: handleOps from their own wallet, as their own beneficiary. Resolves to
 * the EntryPoint's refusal (simulated first, as any bundler does, and then not sent), or
 * undefined once the bundle landed.
 */
export async function submitAsPlayer(
  kit: Pick<AttackKit, "chain" | "bundler">,
  entryPoint: Address,
  userOp: PackedUserOperation,
  authorizationList?: SignedAuthorization[],
): Promise<FailedOp | undefined> {
  try {
    const receipt = await handleOps(kit.chain.publicClient, kit.bundler, entryPoint, [userOp], {
      authorizationList,
    });
    assert.equal(receipt.status, "success");
    return undefined;
  } catch (err) {
    const failed = failedOpOf(err);
    if (failed) return failed;
    throw err;
  }
}

/**
 * Signs the draft with the account's key and lands it as the player (with the EIP-7702
 * authorization it carries, if any); fails if the EntryPoint refuses it.
 */
export async function landAsPlayer(
  kit: Pick<AttackKit, "chain" | "bundler">,
  entryPoint: Address,
  signer: LocalAccount,
  op: DraftOp,
  paymasterAndData: Hex,
  scheme: UserOpSignatureScheme,
): Promise<void> {
  const userOp = await signDraft(kit.chain, entryPoint, signer, op, paymasterAndData, scheme);
  const authorizationList = op.eip7702Auth ? [op.eip7702Auth] : undefined;
  const refused = await submitAsPlayer(kit, entryPoint, userOp, authorizationList);
  assert.equal(refused, undefined, `the EntryPoint refused it: ${refused?.reason}`);
}

/** The same check without sending: what a bundler's simulation says. */
export function simulateAsPlayer(
  kit: Pick<AttackKit, "chain" | "bundler">,
  entryPoint: Address,
  userOp: PackedUserOperation,
): Promise<FailedOp | undefined> {
  return simulateHandleOps(kit.chain.publicClient, kit.bundler.account.address, entryPoint, [userOp]);
}

/** ERC-7579 module management, the calls a player makes on their own account. */
export const erc7579ModuleConfigAbi = parseAbi([
  "function installModule(uint256 moduleTypeId, address module, bytes initData)",
  "function isModuleInstalled(uint256 moduleTypeId, address module, bytes additionalContext) view returns (bool)",
]);

export const MODULE_TYPE = { executor: 2n, fallback: 3n, hook: 4n } as const;

export function installModuleCall(moduleTypeId: bigint, module: Address, initData: Hex = "0x"): Hex {
  return encodeFunctionData({
    abi: erc7579ModuleConfigAbi,
    functionName: "installModule",
    args: [moduleTypeId, module, initData],
  });
}

/**
 * An operation the player pays for themselves (no paymaster): how they install modules on their
 * own account before the attack. The account is funded first for the EntryPoint's prefund.
 */
export async function runUnsponsored(
  kit: Pick<AttackKit, "chain" | "stack" | "t" | "bundler">,
  owner: LocalAccount,
  sender: Address,
  callData: Hex,
  scheme: UserOpSignatureScheme,
): Promise<void> {
  const fund = await kit.chain.wallets[0]!.sendTransaction({ to: sender, value: parseEther("1") });
  await kit.chain.publicClient.waitForTransactionReceipt({ hash: fund });
  const op = await draftOp(kit, { sender, callData, gas: { ...devnetUserOpGas, callGasLimit: 1_000_000n } });
  const userOp = await signDraft(kit.chain, kit.stack.entryPoint, owner, op, "0x", scheme);
  const refused = await submitAsPlayer(kit, kit.stack.entryPoint, userOp);
  assert.equal(refused, undefined, `the player's own operation was refused: ${refused?.reason}`);
}

/** Where an operation goes: the v0.7 pair, or the v0.8 pair (`stack.v08`). */
export interface PaymasterPair {
  entryPoint: Address;
  paymaster: Address;
}

/**
 * An authorization made here with the service's own key, in either mode, binding
 * `senderCodeHash` (by default none: 32 zero bytes, what the service signed for every sender
 * before issue 19). The attack tests use it where the service cannot be asked: to show an attack
 * would land without the code binding where even a `caps_only` project is protected (a known
 * implementation is bound whatever the setting), and to bind a code hash on EntryPoint v0.8 in
 * mode 0, which /sponsor/authorize does not serve.
 */
export async function signedPaymasterAndData(
  kit: Pick<AttackKit, "chain" | "stack">,
  pair: PaymasterPair,
  op: DraftOp,
  mode: PaymasterMode,
  senderCodeHash: Hex = ZERO_HASH,
): Promise<Hex> {
  const signer = privateKeyToAccount(TEST_SIGNER_KEY);
  const domain = { chainId: kit.chain.chainId, paymaster: pair.paymaster };
  const nowSec = await latestTimestampSec(kit.chain);
  const terms = {
    validAfterSec: nowSec - 60,
    validUntilSec: nowSec + 300,
    authId: randomAuthId(),
    senderCodeHash,
  };
  if (mode === "call") {
    const auth: CallAuthorization = {
      ...terms,
      sender: op.sender,
      initCode: initCodeOf(op),
      target: kit.stack.gameItems,
      selector: MINT_SELECTOR,
      maxTotalGas: totalGas(op.gas),
      maxPreVerificationGas: op.gas.preVerificationGas,
      maxFeePerGasWei: op.gas.maxFeePerGas,
      maxPriorityFeePerGasWei: op.gas.maxPriorityFeePerGas,
    };
    const signature = await signCallAuthorization(signer, domain, PAYMASTER_GAS_LIMITS, auth);
    return encodeCallPaymasterAndData(domain, PAYMASTER_GAS_LIMITS, auth, signature);
  }
  const operation = {
    ...buildUserOp({ ...op, initCode: initCodeOf(op) }),
    eip7702Delegate: op.factory === "0x7702" ? op.eip7702Auth?.address : undefined,
  };
  const signature = await signOperationAuthorization(signer, domain, PAYMASTER_GAS_LIMITS, operation, terms);
  return encodeOperationPaymasterAndData(domain, PAYMASTER_GAS_LIMITS, terms, signature);
}
