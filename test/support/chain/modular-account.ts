/**
 * An ERC-7579 account on the test chain: OpenZeppelin 5.7's AccountERC7579 with one ECDSA owner
 * (contracts/test/Modular7579Account.sol), deployed by its first operation through
 * Modular7579AccountFactory, and a viem smart account for it built with `toSmartAccount`, so
 * viem's bundler client drives it exactly as it drives permissionless's accounts.
 *
 * Calls go through ERC-7579 `execute(bytes32 mode, bytes executionCalldata)`: one call as the
 * single call type (0x00) with `abi.encodePacked(target, value, callData)`, several as the batch
 * call type (0x01) with `abi.encode((address,uint256,bytes)[])`; exec type 0x00 (revert on
 * failure) and a zero mode selector and payload in both.
 */
import { readFileSync } from "node:fs";
import {
  type Address,
  encodeAbiParameters,
  encodeFunctionData,
  encodePacked,
  getAddress,
  type Hex,
  type LocalAccount,
  padHex,
  parseAbi,
} from "viem";
import {
  entryPoint07Abi,
  getUserOperationHash,
  type SmartAccount,
  type SmartAccountImplementation,
  toSmartAccount,
} from "viem/account-abstraction";
import type { DevChain } from "./anvil.ts";
import { type CompiledArtifact, ENTRY_POINT_V07_ADDRESS } from "./devnet.ts";

type ChainHandles = Pick<DevChain, "publicClient" | "wallets">;

export const modular7579AccountAbi = parseAbi([
  "function execute(bytes32 mode, bytes executionCalldata) payable",
  "function signer() view returns (address)",
  "function entryPoint() pure returns (address)",
  "function accountId() view returns (string)",
  "function supportsExecutionMode(bytes32 encodedMode) view returns (bool)",
]);

export const modular7579AccountFactoryAbi = parseAbi([
  "function accountImplementation() view returns (address)",
  "function createAccount(address owner, uint256 salt) returns (address account)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);

/** ERC-7579 modes: call type in byte 0, exec type 0x00 (revert on failure) in byte 1, zeros after. */
export const ERC7579_MODE_SINGLE: Hex = padHex("0x00", { dir: "right", size: 32 });
export const ERC7579_MODE_BATCH: Hex = padHex("0x01", { dir: "right", size: 32 });

const executionBatchParams = [
  {
    type: "tuple[]",
    components: [
      { name: "target", type: "address" },
      { name: "value", type: "uint256" },
      { name: "callData", type: "bytes" },
    ],
  },
] as const;

/**
 * A 65-byte signature in range (r below the curve order, low s, v = 28) that recovers to some
 * unrelated address, so gas is estimated on the same path a real signature takes: the recovery
 * succeeds and the owner is read from storage before the comparison fails.
 */
const STUB_SIGNATURE: Hex =
  "0xfffffffffffffffffffffffffffffff0000000000000000000000000000000007aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1c";

export type Modular7579Names = "Modular7579Account" | "Modular7579AccountFactory";

/** An artifact built by `npm run build:contracts` (contracts/artifacts/<name>.json). */
export function modular7579Artifact(name: Modular7579Names): CompiledArtifact {
  const url = new URL(`../../../contracts/artifacts/${name}.json`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8"));
}

/** Deploys a Modular7579AccountFactory (and with it the account implementation) from wallet 0. */
export async function deployModular7579Factory(chain: ChainHandles): Promise<Address> {
  const { abi, bytecode } = modular7579Artifact("Modular7579AccountFactory");
  const hash = await chain.wallets[0]!.deployContract({ abi, bytecode, args: [] });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || !receipt.contractAddress) {
    throw new Error(`Modular7579AccountFactory deployment ${hash} failed`);
  }
  return getAddress(receipt.contractAddress);
}

export interface Call {
  to: Address;
  value?: bigint | undefined;
  data?: Hex | undefined;
}

/** ERC-7579 `execute` calldata: the single call type for one call, the batch call type for more. */
export function encodeErc7579Execute(calls: readonly Call[]): Hex {
  if (calls.length === 1) {
    const [call] = calls as [Call];
    const execution = encodePacked(
      ["address", "uint256", "bytes"],
      [call.to, call.value ?? 0n, call.data ?? "0x"],
    );
    return encodeFunctionData({
      abi: modular7579AccountAbi,
      functionName: "execute",
      args: [ERC7579_MODE_SINGLE, execution],
    });
  }
  const executions = calls.map((c) => ({ target: c.to, value: c.value ?? 0n, callData: c.data ?? "0x" }));
  return encodeFunctionData({
    abi: modular7579AccountAbi,
    functionName: "execute",
    args: [ERC7579_MODE_BATCH, encodeAbiParameters(executionBatchParams, [executions])],
  });
}

export interface ToModular7579AccountParameters {
  client: ChainHandles["publicClient"];
  owner: LocalAccount;
  factory: Address;
  salt?: bigint;
}

export type Modular7579SmartAccount = SmartAccount<SmartAccountImplementation<typeof entryPoint07Abi, "0.7">>;

/** A viem smart account for a Modular7579Account on EntryPoint v0.7. */
export async function toModular7579SmartAccount(
  parameters: ToModular7579AccountParameters,
): Promise<Modular7579SmartAccount> {
  const { client, owner, factory, salt = 0n } = parameters;
  const entryPoint = { abi: entryPoint07Abi, address: ENTRY_POINT_V07_ADDRESS, version: "0.7" } as const;
  const sign = owner.sign;
  if (!sign) throw new Error("the owner must be able to sign a raw hash (a local private-key account)");
  const address = await client.readContract({
    address: factory,
    abi: modular7579AccountFactoryAbi,
    functionName: "getAddress",
    args: [owner.address, salt],
  });

  return toSmartAccount({
    client,
    entryPoint,

    async getAddress() {
      return address;
    },

    async getFactoryArgs() {
      const factoryData = encodeFunctionData({
        abi: modular7579AccountFactoryAbi,
        functionName: "createAccount",
        args: [owner.address, salt],
      });
      return { factory, factoryData };
    },

    async encodeCalls(calls) {
      return encodeErc7579Execute(calls);
    },

    // AccountERC7579 reads a validator module's address from the top 20 bytes of the nonce key.
    // Key 0 names none, so the account's own ECDSA signer validates.
    async getNonce() {
      return client.readContract({
        ...entryPoint,
        functionName: "getNonce",
        args: [address, 0n],
      });
    },

    async getStubSignature() {
      return STUB_SIGNATURE;
    },

    // OpenZeppelin's Account signs the EntryPoint's userOpHash as it is, with no EIP-191 prefix
    // (Account._signableUserOpHash), and SignerECDSA recovers the owner from that hash.
    async signUserOperation(userOperation) {
      const { chainId = client.chain!.id, ...fields } = userOperation;
      const hash = getUserOperationHash({
        chainId,
        entryPointAddress: entryPoint.address,
        entryPointVersion: entryPoint.version,
        userOperation: { ...fields, sender: address },
      });
      return sign({ hash });
    },

    // AccountERC7579 answers ERC-1271 through validator modules only, and this one has none.
    async signMessage() {
      throw new Error("Modular7579Account has no ERC-1271 signer (no validator module installed)");
    },

    async signTypedData() {
      throw new Error("Modular7579Account has no ERC-1271 signer (no validator module installed)");
    },
  });
}
