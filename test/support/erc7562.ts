/**
 * A trace-based ERC-7562 check of a user operation's validation, for the chain tests: the rules a
 * bundler in safe mode enforces before it lets an operation into its mempool, applied to a
 * `debug_traceCall` of the very `handleOps` a bundler would send.
 *
 * Why not Alto's own safe mode: with Alto 0.0.20 it cannot accept any EntryPoint v0.7 operation
 * on any node (test/chain/erc7562.test.ts has the evidence). This file does what its safe mode
 * is meant to do, written from the text of ERC-7562, not from Alto's code:
 *
 * 1. `traceValidation` runs `EntryPoint.handleOps([userOp], bundler)` under `debug_traceCall`
 *    with a JavaScript tracer (anvil runs them: revm-inspectors' JS tracer). The tracer splits
 *    the validation into the ERC-7562 phases, by the EntryPoint's calls that start them:
 *    `SenderCreator.createSender` (the factory), `validateUserOp` (the account) and
 *    `validatePaymasterUserOp` (the paymaster). Inside each phase it records every call frame
 *    (type, from, to, value, selector, opcodes it executed, GAS not followed by a call, out of
 *    gas, error), every storage access (SLOAD, SSTORE, TLOAD, TSTORE: address, slot, read or
 *    write), every address whose code was used (the *CALL and EXTCODE* opcodes, with its code
 *    size then) and the inputs of KECCAK256 (to tell which slots are associated with whom).
 *    Execution after validation is not recorded.
 * 2. `erc7562Violations` applies the rules to that record, per phase, for the entity the phase
 *    belongs to and its stake in the EntryPoint (read by `entitiesOf`).
 *
 * It fails closed: a tracer error, a depth the tracer lost track of, or a phase the operation
 * implies but the trace lacks is a violation ("TRACE"), never a silent pass. (That is not
 * hypothetical: anvil's tracer throws on a zero-length memory slice and then stops calling the
 * tracer's step for the rest of the call without failing it, which makes a careless tracer see
 * an empty validation.)
 *
 * Rules checked (ERC-7562 ids): OP-011 (banned opcodes, with BLOBHASH and BLOBBASEFEE), OP-012
 * (GAS only right before a call), OP-013 (unassigned opcodes), OP-020 (out of gas), OP-031
 * (CREATE2 only once, by the factory), OP-041/042 (no use of an address without code except the
 * sender), OP-051..054 (EntryPoint access), OP-061 (no value in calls but to the EntryPoint),
 * OP-062 (precompiles 0x01..0x09 only), OP-070 (transient storage is storage), OP-080 (BALANCE
 * and SELFBALANCE only for staked entities), STO-010, STO-021/022, STO-031/032/033. Not checked:
 * COD-010 (code hashes between two validations) and the reputation and mempool rules, which
 * are about a bundler's state, not about the contracts.
 */
import {
  type Address,
  type Chain,
  encodeFunctionData,
  getAddress,
  type Hex,
  hexToBigInt,
  isAddressEqual,
  keccak256,
  type PublicClient,
  pad,
  slice,
  type Transport,
} from "viem";
import { entryPoint07Abi, type PackedUserOperation } from "viem/account-abstraction";

/** ERC-7562's MIN_UNSTAKE_DELAY: one day. */
export const MIN_UNSTAKE_DELAY_SEC = 86_400;

/** Alto's default `--min-entity-stake` (1, in units of 10^18); ERC-7562 leaves it to each chain. */
export const DEFAULT_MIN_STAKE_WEI = 10n ** 18n;

/** The EntryPoint v0.7 calls that open the three validation phases. */
const PHASE_SELECTORS = {
  /** SenderCreator.createSender(bytes): runs the factory. */
  factory: "0x570e1a36",
  /** IAccount.validateUserOp(PackedUserOperation,bytes32,uint256). */
  account: "0x19822f7c",
  /** IPaymaster.validatePaymasterUserOp(PackedUserOperation,bytes32,uint256). */
  paymaster: "0x52b7512c",
} as const;

/** IStakeManager.depositTo(address): the one EntryPoint function validation may call ([OP-052]). */
const DEPOSIT_TO_SELECTOR = "0xb760faf9";

export type Entity = keyof typeof PHASE_SELECTORS;

/**
 * The tracer, in the dialect both geth and anvil accept: an object literal with step, enter,
 * exit, fault and result. It records nothing outside a validation phase.
 */
const VALIDATION_TRACER = `{
  entryPoint: "__ENTRY_POINT__",
  phaseSelectors: { "${PHASE_SELECTORS.factory}": "factory", "${PHASE_SELECTORS.account}": "account", "${PHASE_SELECTORS.paymaster}": "paymaster" },
  depth: 1,
  phases: [],
  phase: null,
  open: [],
  errors: [],
  lastOp: "",
  lastCodeAccess: null,

  hex: function (bytes) { return toHex(bytes).toLowerCase(); },
  word: function (big) { return toHex(toWord(big.toString(16))).toLowerCase(); },
  address: function (big) { return toHex(toAddress(big.toString(16))).toLowerCase(); },
  num: function (big) { return parseInt(big.toString()); },
  fail: function (where, e) { if (this.errors.length < 20) this.errors.push(where + ": " + e); },

  enter: function (frame) {
    this.depth++;
    try {
      var input = this.hex(frame.getInput());
      var from = this.hex(frame.getFrom());
      var value = frame.getValue();
      var record = {
        type: frame.getType(), from: from, to: this.hex(frame.getTo()),
        selector: input.length >= 10 ? input.slice(0, 10) : input,
        value: value === undefined || value === null ? "0" : value.toString(),
        depth: this.depth, opcodes: {}, gasNotBeforeCall: 0, oog: false, error: null
      };
      if (this.phase === null) {
        var entity = this.phaseSelectors[record.selector];
        if (entity === undefined || from !== this.entryPoint || record.type !== "CALL") return;
        this.phase = { entity: entity, selector: record.selector, target: record.to, depth: this.depth,
          frames: [], storage: {}, code: [], keccak: [], output: "0x", error: null };
        this.lastOp = "";
        this.lastCodeAccess = null;
      }
      this.phase.frames.push(record);
      this.open.push(record);
    } catch (e) { this.fail("enter", e); }
  },

  exit: function (result) {
    try {
      if (this.phase !== null && this.open.length > 0) {
        var record = this.open.pop();
        var error = result.getError();
        record.error = error === undefined || error === null ? null : String(error);
        if (this.open.length === 0) {
          this.phase.output = this.hex(result.getOutput());
          this.phase.error = record.error;
          this.phases.push(this.phase);
          this.phase = null;
        }
      }
    } catch (e) { this.fail("exit", e); }
    this.depth--;
  },

  step: function (log, db) {
    if (this.phase === null) return;
    try {
      var frame = this.open[this.open.length - 1];
      if (log.getDepth() !== this.depth || frame === undefined) {
        this.fail("step", "depth " + log.getDepth() + " but tracking " + this.depth);
        return;
      }
      var op = log.op.toString();
      frame.opcodes[op] = (frame.opcodes[op] || 0) + 1;
      var isCall = op === "CALL" || op === "CALLCODE" || op === "DELEGATECALL" || op === "STATICCALL";
      if (this.lastOp === "GAS" && !isCall) frame.gasNotBeforeCall++;
      if (this.lastCodeAccess !== null) {
        if (op === "ISZERO") this.lastCodeAccess.thenIszero = true;
        this.lastCodeAccess = null;
      }
      this.lastOp = op;
      if (log.getGas() < log.getCost()) frame.oog = true;

      if (op === "SLOAD" || op === "SSTORE" || op === "TLOAD" || op === "TSTORE") {
        var key = op + " " + this.hex(log.contract.getAddress()) + " " + this.word(log.stack.peek(0));
        this.phase.storage[key] = (this.phase.storage[key] || 0) + 1;
      } else if (isCall || op.indexOf("EXTCODE") === 0) {
        var target = log.stack.peek(isCall ? 1 : 0);
        var access = { op: op, address: this.address(target), codeSize: db.getCode(toAddress(target.toString(16))).length, thenIszero: false };
        this.phase.code.push(access);
        if (op === "EXTCODESIZE") this.lastCodeAccess = access;
      } else if (op === "KECCAK256" || op === "SHA3") {
        var offset = this.num(log.stack.peek(0));
        var length = this.num(log.stack.peek(1));
        // anvil throws on an empty slice: only read what is there to read.
        if (length >= 32 && length <= 1024) this.phase.keccak.push(this.hex(log.memory.slice(offset, offset + length)));
      }
    } catch (e) { this.fail("step", e); }
  },

  fault: function (log, db) {
    if (this.phase !== null && this.open.length > 0 && log.getGas() < log.getCost()) this.open[this.open.length - 1].oog = true;
  },

  result: function (ctx, db) {
    return { phases: this.phases, errors: this.errors, unfinishedPhase: this.phase === null ? null : this.phase.entity };
  }
}`;

export interface TracedFrame {
  type: string;
  from: Address;
  to: Address;
  /** The first four bytes of the frame's input ("0x" when it has none). */
  selector: Hex;
  value: bigint;
  depth: number;
  /** Every opcode the frame executed, with its count (not its subcalls'). */
  opcodes: Record<string, number>;
  /** GAS opcodes not immediately followed by a *CALL ([OP-012]). */
  gasNotBeforeCall: number;
  oog: boolean;
  error: string | null;
}

export interface StorageAccess {
  op: "SLOAD" | "SSTORE" | "TLOAD" | "TSTORE";
  address: Address;
  slot: Hex;
  count: number;
}

export interface CodeAccess {
  op: string;
  address: Address;
  codeSize: number;
  /** An EXTCODESIZE followed by ISZERO (the pattern [OP-051] allows on the EntryPoint). */
  thenIszero: boolean;
}

export interface ValidationPhase {
  entity: Entity;
  /** The contract the EntryPoint called to open the phase (SenderCreator for the factory). */
  target: Address;
  frames: TracedFrame[];
  storage: StorageAccess[];
  code: CodeAccess[];
  /** Inputs of KECCAK256 (32 to 1024 bytes), for associated storage. */
  keccak: Hex[];
  /** What the phase's first call returned, or its revert data. */
  output: Hex;
  error: string | null;
}

export interface ValidationTrace {
  phases: ValidationPhase[];
  /** Anything the tracer could not record. */
  tracerErrors: string[];
  /** A phase still open when the trace ended. */
  unfinishedPhase: Entity | null;
}

interface RawFrame extends Omit<TracedFrame, "value" | "from" | "to" | "selector"> {
  from: string;
  to: string;
  selector: string;
  value: string;
}

interface RawPhase {
  entity: Entity;
  target: string;
  frames: RawFrame[];
  storage: Record<string, number>;
  code: { op: string; address: string; codeSize: number; thenIszero: boolean }[];
  keccak: string[];
  output: string;
  error: string | null;
}

interface RawTrace {
  phases: RawPhase[];
  errors: string[];
  unfinishedPhase: Entity | null;
}

async function jsonRpc<T>(rpcUrl: string, method: string, params: unknown[]): Promise<T> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const reply = (await res.json()) as { result?: T; error?: { message: string } };
  if (reply.error || reply.result === undefined) {
    throw new Error(`${method}: ${reply.error?.message ?? `HTTP ${res.status}, no result`}`);
  }
  return reply.result;
}

export interface TraceValidationParams {
  rpcUrl: string;
  entryPoint: Address;
  userOp: PackedUserOperation;
  /** The EOA that would send the bundle (and receive its fees). */
  bundler: Address;
  /** Gas for the traced handleOps call. Default 10M. */
  gas?: bigint;
}

/** Traces `handleOps([userOp], bundler)` from `bundler` on the latest block and returns the validation phases. */
export async function traceValidation(p: TraceValidationParams): Promise<ValidationTrace> {
  const data = encodeFunctionData({
    abi: entryPoint07Abi,
    functionName: "handleOps",
    args: [[p.userOp], p.bundler],
  });
  const tx = { from: p.bundler, to: p.entryPoint, data, gas: `0x${(p.gas ?? 10_000_000n).toString(16)}` };
  const tracer = VALIDATION_TRACER.replace("__ENTRY_POINT__", p.entryPoint.toLowerCase());
  const raw = await jsonRpc<RawTrace>(p.rpcUrl, "debug_traceCall", [tx, "latest", { tracer }]);
  return {
    tracerErrors: raw.errors,
    unfinishedPhase: raw.unfinishedPhase,
    phases: raw.phases.map((phase) => ({
      entity: phase.entity,
      target: getAddress(phase.target),
      output: phase.output as Hex,
      error: phase.error,
      keccak: phase.keccak as Hex[],
      frames: phase.frames.map((f) => ({
        ...f,
        from: getAddress(f.from),
        to: getAddress(f.to),
        selector: f.selector as Hex,
        value: BigInt(f.value),
      })),
      storage: Object.entries(phase.storage).map(([key, count]) => {
        const [op, address, slot] = key.split(" ") as [StorageAccess["op"], string, string];
        return { op, address: getAddress(address), slot: slot as Hex, count };
      }),
      code: phase.code.map((c) => ({ ...c, address: getAddress(c.address) })),
    })),
  };
}

export interface StakeInfo {
  stakeWei: bigint;
  unstakeDelaySec: number;
  /** Locked in the EntryPoint with at least the minimum stake and ERC-7562's MIN_UNSTAKE_DELAY. */
  staked: boolean;
}

export interface Entities {
  entryPoint: Address;
  sender: Address;
  /** Whether the sender has code before the operation (no initCode needed). */
  senderExists: boolean;
  factory?: Address;
  paymaster?: Address;
  stake: Partial<Record<Entity, StakeInfo>>;
}

type Reader = PublicClient<Transport, Chain | undefined>;

export async function stakeOf(
  client: Reader,
  entryPoint: Address,
  address: Address,
  minStakeWei = DEFAULT_MIN_STAKE_WEI,
): Promise<StakeInfo> {
  const info = await client.readContract({
    address: entryPoint,
    abi: entryPoint07Abi,
    functionName: "getDepositInfo",
    args: [address],
  });
  return {
    stakeWei: info.stake,
    unstakeDelaySec: info.unstakeDelaySec,
    staked: info.staked && info.stake >= minStakeWei && info.unstakeDelaySec >= MIN_UNSTAKE_DELAY_SEC,
  };
}

/** The operation's entities and their stakes, as a bundler sees them before validating it. */
export async function entitiesOf(
  client: Reader,
  entryPoint: Address,
  userOp: PackedUserOperation,
  minStakeWei = DEFAULT_MIN_STAKE_WEI,
): Promise<Entities> {
  const factory = userOp.initCode.length >= 42 ? getAddress(slice(userOp.initCode, 0, 20)) : undefined;
  const paymaster =
    userOp.paymasterAndData.length >= 42 ? getAddress(slice(userOp.paymasterAndData, 0, 20)) : undefined;
  const code = await client.getCode({ address: userOp.sender });
  const stake: Entities["stake"] = {
    account: await stakeOf(client, entryPoint, userOp.sender, minStakeWei),
  };
  if (factory) stake.factory = await stakeOf(client, entryPoint, factory, minStakeWei);
  if (paymaster) stake.paymaster = await stakeOf(client, entryPoint, paymaster, minStakeWei);
  return {
    entryPoint: getAddress(entryPoint),
    sender: getAddress(userOp.sender),
    senderExists: code !== undefined && code !== "0x",
    factory,
    paymaster,
    stake,
  };
}

export interface Violation {
  /** The ERC-7562 rule broken ("OP-011", "STO-033", …), or "TRACE" when the trace cannot be trusted. */
  rule: string;
  entity: Entity | "trace";
  detail: string;
}

/** [OP-011], with the blob opcodes of the newer revisions; alternative names of the same opcodes included. */
const BANNED_OPCODES = new Set([
  "ORIGIN",
  "GASPRICE",
  "BLOCKHASH",
  "COINBASE",
  "TIMESTAMP",
  "NUMBER",
  "DIFFICULTY",
  "PREVRANDAO",
  "RANDOM",
  "GASLIMIT",
  "BASEFEE",
  "BLOBHASH",
  "BLOBBASEFEE",
  "CREATE",
  "INVALID",
  "SELFDESTRUCT",
  "SUICIDE",
]);

/** [OP-080]: allowed to staked entities only. */
const STAKED_ONLY_OPCODES = new Set(["BALANCE", "SELFBALANCE"]);

/** Every assigned opcode through Cancun, under each name tracers use; anything else breaks [OP-013]. */
const ASSIGNED_OPCODES = new Set([
  ...`STOP ADD MUL SUB DIV SDIV MOD SMOD ADDMOD MULMOD EXP SIGNEXTEND LT GT SLT SGT EQ ISZERO AND OR XOR
      NOT BYTE SHL SHR SAR KECCAK256 SHA3 ADDRESS BALANCE ORIGIN CALLER CALLVALUE CALLDATALOAD CALLDATASIZE
      CALLDATACOPY CODESIZE CODECOPY GASPRICE EXTCODESIZE EXTCODECOPY RETURNDATASIZE RETURNDATACOPY
      EXTCODEHASH BLOCKHASH COINBASE TIMESTAMP NUMBER DIFFICULTY PREVRANDAO RANDOM GASLIMIT CHAINID
      SELFBALANCE BASEFEE BLOBHASH BLOBBASEFEE POP MLOAD MSTORE MSTORE8 SLOAD SSTORE JUMP JUMPI PC MSIZE GAS
      JUMPDEST TLOAD TSTORE MCOPY PUSH0 CREATE CALL CALLCODE RETURN DELEGATECALL CREATE2 STATICCALL REVERT
      INVALID SELFDESTRUCT SUICIDE`.split(/\s+/),
  ...Array.from({ length: 32 }, (_, i) => `PUSH${i + 1}`),
  ...Array.from({ length: 16 }, (_, i) => `DUP${i + 1}`),
  ...Array.from({ length: 16 }, (_, i) => `SWAP${i + 1}`),
  ...Array.from({ length: 5 }, (_, i) => `LOG${i}`),
]);

const CALL_OPCODES = new Set(["CALL", "CALLCODE", "DELEGATECALL", "STATICCALL"]);

/**
 * [OP-062]: the core precompiles 0x01..0x09 are allowed. The others a node may have (0x0a, the
 * BLS12-381 ones at 0x0b..0x11, RIP-7212's P256VERIFY at 0x100) are not, on this chain.
 */
function precompileKind(address: Address): "allowed" | "other" | "none" {
  const n = hexToBigInt(address);
  if (n >= 1n && n <= 9n) return "allowed";
  if ((n >= 0x0an && n <= 0x11n) || n === 0x100n) return "other";
  return "none";
}

/**
 * Whether `slot` is associated with `owner` (ERC-7562 definitions): the slot is the address
 * itself, or keccak(owner || x) + n for n < 128, with the keccak computed during validation.
 */
function isAssociated(slot: Hex, owner: Address, preimages: readonly Hex[]): boolean {
  const padded = pad(owner.toLowerCase() as Hex, { size: 32 });
  if (slot.toLowerCase() === padded) return true;
  const slotN = hexToBigInt(slot);
  return preimages.some((preimage) => {
    if (!preimage.toLowerCase().startsWith(padded)) return false;
    const base = hexToBigInt(keccak256(preimage));
    return slotN >= base && slotN < base + 128n;
  });
}

function entityAddress(entities: Entities, entity: Entity): Address | undefined {
  return entity === "account" ? entities.sender : entities[entity];
}

function roleOf(entities: Entities, address: Address): Entity | undefined {
  return (["account", "factory", "paymaster"] as const).find((e) => {
    const a = entityAddress(entities, e);
    return a !== undefined && isAddressEqual(a, address);
  });
}

/** Every ERC-7562 rule the traced validation breaks; an empty list when it passes. */
export function erc7562Violations(trace: ValidationTrace, entities: Entities): Violation[] {
  const out: Violation[] = [];
  for (const e of trace.tracerErrors)
    out.push({ rule: "TRACE", entity: "trace", detail: `tracer error: ${e}` });
  if (trace.unfinishedPhase) {
    out.push({ rule: "TRACE", entity: "trace", detail: `phase ${trace.unfinishedPhase} never ended` });
  }
  const expected: Entity[] = ["account"];
  if (entities.factory) expected.push("factory");
  if (entities.paymaster) expected.push("paymaster");
  for (const entity of expected) {
    if (!trace.phases.some((p) => p.entity === entity)) {
      out.push({ rule: "TRACE", entity: "trace", detail: `no ${entity} validation phase in the trace` });
    }
  }
  // Association is by any KECCAK256 input seen during validation.
  const preimages = trace.phases.flatMap((p) => p.keccak);
  for (const phase of trace.phases) out.push(...phaseViolations(phase, entities, preimages));
  return out;
}

function phaseViolations(phase: ValidationPhase, entities: Entities, preimages: readonly Hex[]): Violation[] {
  const out: Violation[] = [];
  const entity = phase.entity;
  const add = (rule: string, detail: string) => out.push({ rule, entity, detail });
  const self = entityAddress(entities, entity);
  const staked = entities.stake[entity]?.staked ?? false;
  const { entryPoint, sender } = entities;

  // Opcodes.
  let create2 = 0;
  for (const frame of phase.frames) {
    const where = `in ${frame.to} (${frame.type} ${frame.selector})`;
    for (const [op, count] of Object.entries(frame.opcodes)) {
      if (BANNED_OPCODES.has(op)) add("OP-011", `${op} ×${count} ${where}`);
      else if (STAKED_ONLY_OPCODES.has(op) && !staked)
        add("OP-080", `${op} ×${count} ${where}, entity unstaked`);
      else if (!ASSIGNED_OPCODES.has(op)) add("OP-013", `unassigned opcode ${op} ${where}`);
      if (op === "CREATE2") create2 += count;
    }
    if (frame.gasNotBeforeCall > 0)
      add("OP-012", `GAS not followed by a call ×${frame.gasNotBeforeCall} ${where}`);
    if (frame.oog || /out of gas|outofgas/i.test(frame.error ?? "")) add("OP-020", `out of gas ${where}`);
    // Calls into the EntryPoint ([OP-052], [OP-053], [OP-054]); the phase's own call comes from it.
    if (isAddressEqual(frame.to, entryPoint) && !isAddressEqual(frame.from, entryPoint)) {
      const fromSender = isAddressEqual(frame.from, sender);
      const fromFactory = entities.factory !== undefined && isAddressEqual(frame.from, entities.factory);
      const allowed =
        (frame.selector === DEPOSIT_TO_SELECTOR && (fromSender || fromFactory)) ||
        (frame.selector === "0x" && fromSender);
      if (!allowed) add("OP-054", `${frame.type} ${frame.selector} into the EntryPoint from ${frame.from}`);
    }
    // [OP-061]: value only ever goes to the EntryPoint.
    if ((frame.type === "CALL" || frame.type === "CALLCODE") && frame.value > 0n) {
      if (!isAddressEqual(frame.to, entryPoint))
        add("OP-061", `${frame.type} with ${frame.value} wei to ${frame.to}`);
    }
  }
  if (create2 > 0 && entity !== "factory") add("OP-031", `CREATE2 ×${create2} outside the factory`);
  if (create2 > 1 && entity === "factory") add("OP-031", `CREATE2 ×${create2} in the factory`);

  // Use of code ([OP-041], [OP-042], [OP-051], [OP-062]).
  for (const access of phase.code) {
    if (isAddressEqual(access.address, entryPoint)) {
      const allowed = CALL_OPCODES.has(access.op) || (access.op === "EXTCODESIZE" && access.thenIszero);
      if (!allowed) add("OP-054", `${access.op} of the EntryPoint`);
      continue;
    }
    if (access.codeSize > 0 || isAddressEqual(access.address, sender)) continue;
    const precompile = precompileKind(access.address);
    if (precompile === "allowed" && CALL_OPCODES.has(access.op)) continue;
    if (precompile === "other") add("OP-062", `${access.op} of ${access.address}, not an allowed precompile`);
    else add("OP-041", `${access.op} of ${access.address}, which has no code`);
  }

  // Storage ([STO-010], [STO-021], [STO-022], [STO-031], [STO-032], [STO-033]; [OP-070] for transient).
  const factoryStaked = entities.stake.factory?.staked ?? false;
  for (const access of phase.storage) {
    const { address, slot, op } = access;
    const write = op === "SSTORE" || op === "TSTORE";
    const what = `${write ? "write" : "read"} (${op}) of ${address} slot ${slot}`;
    // The EntryPoint's storage only changes inside calls the rules above police (depositTo).
    if (isAddressEqual(address, entryPoint)) continue;
    if (isAddressEqual(address, sender)) continue; // [STO-010]
    const role = roleOf(entities, address);
    if (role !== undefined) {
      if (role !== entity) add("STO-031", `${what}: storage of the ${role}, another entity`);
      else if (!staked) add("STO-031", `${what}: its own storage, entity unstaked`);
      continue;
    }
    // A contract that is no entity.
    const ofSender = isAssociated(slot, sender, preimages);
    if (ofSender && (entities.senderExists || factoryStaked)) continue; // [STO-021], [STO-022]
    const ofSelf = self !== undefined && isAssociated(slot, self, preimages);
    if (staked && ofSelf) continue; // [STO-032]
    if (staked && !write) continue; // [STO-033]
    if (ofSender) add("STO-022", `${what}: associated with a sender not deployed yet, factory unstaked`);
    else if (ofSelf) add("STO-032", `${what}: associated with the entity, entity unstaked`);
    else if (!write) add("STO-033", `${what}: not associated with the sender, entity unstaked`);
    else add("STO-033", `${what}: not associated with the sender or the entity`);
  }
  return out;
}

/** The phase of `entity`, which must be in the trace exactly once. */
export function phaseOf(trace: ValidationTrace, entity: Entity): ValidationPhase {
  const phases = trace.phases.filter((p) => p.entity === entity);
  if (phases.length !== 1) throw new Error(`${phases.length} ${entity} phases in the trace`);
  return phases[0]!;
}

/** All the opcodes a phase executed, over all its frames. */
export function phaseOpcodes(phase: ValidationPhase): Record<string, number> {
  const total: Record<string, number> = {};
  for (const frame of phase.frames) {
    for (const [op, count] of Object.entries(frame.opcodes)) total[op] = (total[op] ?? 0) + count;
  }
  return total;
}

export interface Erc7562Check {
  entities: Entities;
  trace: ValidationTrace;
  violations: Violation[];
}

/** Reads the entities' stakes, traces the validation and applies the rules. */
export async function checkErc7562(
  client: Reader,
  p: TraceValidationParams & { minStakeWei?: bigint },
): Promise<Erc7562Check> {
  const entities = await entitiesOf(client, p.entryPoint, p.userOp, p.minStakeWei);
  const trace = await traceValidation(p);
  return { entities, trace, violations: erc7562Violations(trace, entities) };
}
