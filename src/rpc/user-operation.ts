/**
 * The params of `pm_getPaymasterStubData` / `pm_getPaymasterData` (ERC-7677):
 * `[userOperation, entryPoint, chainId (hex), context]`, checked strictly field by field, so
 * that a malformed request is refused with a message naming the field and never reaches a
 * decision. The operation is EntryPoint v0.7/v0.8's unpacked JSON-RPC form.
 */
import type { Address, Hex } from "viem";
import type { OperationFields } from "../sponsor/operation.ts";

export const MAX_CALL_DATA_BYTES = 32 * 1024;
export const MAX_FACTORY_DATA_BYTES = 8 * 1024;
const UINT128_MAX = 2n ** 128n - 1n;
const UINT256_MAX = 2n ** 256n - 1n;

export interface SponsorParams {
  userOp: OperationFields;
  entryPoint: Address;
  chainId: number;
  context: { projectId?: string };
}

export type ParamsResult = { kind: "params"; params: SponsorParams } | { kind: "invalid"; detail: string };

class Invalid extends Error {}

export function parseSponsorParams(params: unknown[]): ParamsResult {
  try {
    if (params.length < 3 || params.length > 4) {
      throw new Invalid("params must be [userOperation, entryPoint, chainId, context?]");
    }
    const [op, entryPoint, chainId, context] = params;
    return {
      kind: "params",
      params: {
        userOp: userOperation(op),
        entryPoint: address(entryPoint, "entryPoint"),
        chainId: chainIdOf(chainId),
        context: contextOf(context),
      },
    };
  } catch (err) {
    if (err instanceof Invalid) return { kind: "invalid", detail: err.message };
    throw err;
  }
}

function userOperation(value: unknown): OperationFields {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Invalid("userOperation must be an object");
  }
  const o = value as Record<string, unknown>;
  const gas = (name: string) => quantity(o[name], `userOperation.${name}`, UINT128_MAX);
  const optionalGas = (name: string) => (o[name] === undefined || o[name] === null ? null : gas(name));
  const factory = o.factory === undefined || o.factory === null ? null : factoryOf(o.factory);
  return {
    sender: address(o.sender, "userOperation.sender"),
    nonce: quantity(o.nonce, "userOperation.nonce", UINT256_MAX),
    factory,
    factoryData: factory
      ? bytes(o.factoryData ?? "0x", "userOperation.factoryData", MAX_FACTORY_DATA_BYTES)
      : "0x",
    callData: bytes(o.callData, "userOperation.callData", MAX_CALL_DATA_BYTES),
    // Before estimation a wallet may send zeros or leave the gas fields out.
    callGasLimit: o.callGasLimit === undefined ? 0n : gas("callGasLimit"),
    verificationGasLimit: o.verificationGasLimit === undefined ? 0n : gas("verificationGasLimit"),
    preVerificationGas: o.preVerificationGas === undefined ? 0n : gas("preVerificationGas"),
    maxFeePerGas: o.maxFeePerGas === undefined ? 0n : gas("maxFeePerGas"),
    maxPriorityFeePerGas: o.maxPriorityFeePerGas === undefined ? 0n : gas("maxPriorityFeePerGas"),
    paymasterVerificationGasLimit: optionalGas("paymasterVerificationGasLimit"),
    paymasterPostOpGasLimit: optionalGas("paymasterPostOpGasLimit"),
    eip7702Delegate: eip7702DelegateOf(o.eip7702Auth),
  };
}

/**
 * EntryPoint v0.8's EIP-7702 operations carry the sender's authorization (`eip7702Auth`); the
 * whole-operation authorization binds the implementation it delegates to (`address`). The rest
 * of it (chain, nonce, signature) is checked by the chain when the bundle lands.
 */
function eip7702DelegateOf(value: unknown): Address | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" || Array.isArray(value))
    throw new Invalid("userOperation.eip7702Auth must be an object");
  const auth = value as Record<string, unknown>;
  return address(auth.address ?? auth.contractAddress, "userOperation.eip7702Auth.address");
}

/**
 * A factory address, or EntryPoint v0.8's EIP-7702 marker, which viem sends as the two bytes
 * `0x7702` (the padded 20-byte form is an address already). The initCode signed is exactly
 * factory ‖ factoryData as the client sends it, which is what the bundler packs.
 */
function factoryOf(value: unknown): Address {
  if (typeof value === "string" && value.toLowerCase() === "0x7702") return "0x7702" as Address;
  return address(value, "userOperation.factory");
}

function address(value: unknown, name: string): Address {
  if (typeof value !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(value)) {
    throw new Invalid(`${name} must be a 20-byte hex address`);
  }
  return value.toLowerCase() as Address;
}

function quantity(value: unknown, name: string, max: bigint): bigint {
  if (typeof value !== "string" || !/^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,63})$/.test(value)) {
    throw new Invalid(`${name} must be a hex quantity (0x-prefixed, no leading zeros)`);
  }
  const n = BigInt(value);
  if (n > max) throw new Invalid(`${name} is out of range`);
  return n;
}

function bytes(value: unknown, name: string, maxBytes: number): Hex {
  if (typeof value !== "string" || !/^0x([0-9a-fA-F]{2})*$/.test(value)) {
    throw new Invalid(`${name} must be 0x-prefixed hex bytes`);
  }
  if ((value.length - 2) / 2 > maxBytes) throw new Invalid(`${name} is longer than ${maxBytes} bytes`);
  return value.toLowerCase() as Hex;
}

function chainIdOf(value: unknown): number {
  const n = quantity(value, "chainId", BigInt(Number.MAX_SAFE_INTEGER));
  if (n === 0n) throw new Invalid("chainId must not be 0");
  return Number(n);
}

function contextOf(value: unknown): { projectId?: string } {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new Invalid("context must be an object");
  const projectId = (value as Record<string, unknown>).projectId;
  if (projectId === undefined) return {};
  if (typeof projectId !== "string" || !/^[a-z0-9_-]{3,64}$/.test(projectId)) {
    throw new Invalid("context.projectId must be a project id");
  }
  return { projectId };
}
