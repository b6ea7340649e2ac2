/**
 * Third-party smart accounts on the test chain, at the addresses permissionless's
 * `to…SmartAccount` helpers expect, so that the helpers run unchanged (no address overrides).
 *
 * Safe (permissionless `toSafeSmartAccount`, Safe 1.4.1 with EntryPoint v0.7): the release
 * artifacts of `@safe-global/safe-contracts` 1.4.1 and `@safe-global/safe-4337` 0.3.0, deployed
 * the way Safe deployed them on public chains: init code sent to a CREATE2 factory with a zero
 * salt. Safe's core contracts went through the Safe singleton factory, the 4337 module and its
 * setup contract through the deterministic deployment proxy (Arachnid's, which anvil ships).
 * Every predicted address (a hash of the factory, the salt and the whole init code) is checked
 * against permissionless's constants before anything is sent, so a different compiler output
 * would fail here rather than run a look-alike. Nothing is installed with
 * anvil_setCode except the singleton factory itself, which has no key for this chain id (see
 * {@link SAFE_SINGLETON_FACTORY_ADDRESS}).
 */
import { createRequire } from "node:module";
import {
  type Address,
  concatHex,
  encodeAbiParameters,
  getAddress,
  getContractAddress,
  type Hex,
  isAddressEqual,
} from "viem";
import type { DevChain } from "./anvil.ts";
import { CREATE2_DEPLOYER_ADDRESS, ENTRY_POINT_V07_ADDRESS } from "./devnet.ts";

type ChainHandles = Pick<DevChain, "publicClient" | "testClient" | "wallets">;

/**
 * The Safe singleton factory. Safe signs its deployment transaction per chain id and has none
 * for this chain, so its runtime code is installed directly: it is byte for byte the
 * deterministic deployment proxy's (the signed transactions in `@safe-global/safe-singleton-factory`
 * carry the same init code as Arachnid's), which anvil has at genesis and this copies.
 */
export const SAFE_SINGLETON_FACTORY_ADDRESS: Address = "0x914d7Fec6aaC8cd542e72Bca78B30650d45643d7";

/** The zero salt every Safe contract below was deployed with. */
const ZERO_SALT: Hex = `0x${"00".repeat(32)}`;

/**
 * permissionless 0.4's addresses for Safe 1.4.1 with EntryPoint v0.7
 * (accounts/safe/toSafeSmartAccount.ts, SAFE_VERSION_TO_ADDRESSES_MAP["1.4.1"]["0.7"]).
 */
export const SAFE_V141_ADDRESSES = {
  safeSingleton: "0x41675C099F32341bf84BFc5382aF534df5C7461a",
  safeProxyFactory: "0x4e1DCf7AD4e460CfD30791CCC4F9c8a4f820ec67",
  multiSend: "0x38869bf66a61cF6bDB996A6aE40D5853Fd43B526",
  multiSendCallOnly: "0x9641d764fc13c8B624c04430C7356C1C7C8102e2",
  safeModuleSetup: "0x2dd68b007B46fBe91B9A7c3EDa5A7a1063cB5b47",
  safe4337Module: "0x75cf11467937ce3F2f357CE24ffc3DBF8fD5c226",
} as const satisfies Record<string, Address>;

export type SafeContractName = keyof typeof SAFE_V141_ADDRESSES;

interface HardhatArtifact {
  bytecode: Hex;
}

interface Deterministic {
  name: SafeContractName;
  /** Which package, and the artifact's path inside it. */
  artifact: string;
  factory: Address;
  constructorArgs: Hex;
}

const SAFE_CONTRACTS = "@safe-global/safe-contracts/build/artifacts/contracts";
const SAFE_4337 = "@safe-global/safe-4337/build/artifacts/contracts";

const SAFE_DEPLOYMENTS: readonly Deterministic[] = [
  {
    name: "safeSingleton",
    artifact: `${SAFE_CONTRACTS}/Safe.sol/Safe.json`,
    factory: SAFE_SINGLETON_FACTORY_ADDRESS,
    constructorArgs: "0x",
  },
  {
    name: "safeProxyFactory",
    artifact: `${SAFE_CONTRACTS}/proxies/SafeProxyFactory.sol/SafeProxyFactory.json`,
    factory: SAFE_SINGLETON_FACTORY_ADDRESS,
    constructorArgs: "0x",
  },
  {
    name: "multiSend",
    artifact: `${SAFE_CONTRACTS}/libraries/MultiSend.sol/MultiSend.json`,
    factory: SAFE_SINGLETON_FACTORY_ADDRESS,
    constructorArgs: "0x",
  },
  {
    name: "multiSendCallOnly",
    artifact: `${SAFE_CONTRACTS}/libraries/MultiSendCallOnly.sol/MultiSendCallOnly.json`,
    factory: SAFE_SINGLETON_FACTORY_ADDRESS,
    constructorArgs: "0x",
  },
  {
    name: "safeModuleSetup",
    artifact: `${SAFE_4337}/SafeModuleSetup.sol/SafeModuleSetup.json`,
    factory: CREATE2_DEPLOYER_ADDRESS,
    constructorArgs: "0x",
  },
  {
    // The module's only immutable is the EntryPoint it serves, set by this constructor argument.
    name: "safe4337Module",
    artifact: `${SAFE_4337}/Safe4337Module.sol/Safe4337Module.json`,
    factory: CREATE2_DEPLOYER_ADDRESS,
    constructorArgs: encodeAbiParameters([{ type: "address" }], [ENTRY_POINT_V07_ADDRESS]),
  },
];

function artifact(path: string): HardhatArtifact {
  return createRequire(import.meta.url)(path);
}

/**
 * Deploys Safe 1.4.1 and the Safe4337Module 0.3.0 stack at permissionless's addresses (the
 * EntryPoint v0.7 must already be there). Idempotent: contracts already in place are left as
 * they are. Returns the addresses, checked against permissionless's.
 */
export async function deploySafeContracts(chain: ChainHandles): Promise<typeof SAFE_V141_ADDRESSES> {
  await installSafeSingletonFactory(chain);
  for (const d of SAFE_DEPLOYMENTS) {
    const expected = SAFE_V141_ADDRESSES[d.name];
    const initCode = concatHex([artifact(d.artifact).bytecode, d.constructorArgs]);
    const predicted = getContractAddress({
      opcode: "CREATE2",
      from: d.factory,
      salt: ZERO_SALT,
      bytecode: initCode,
    });
    if (!isAddressEqual(predicted, expected)) {
      throw new Error(
        `${d.artifact} through ${d.factory} lands at ${predicted}, not at permissionless's ${expected}: the package's bytecode is not the release's`,
      );
    }
    await create2(chain, d.factory, initCode, expected);
  }
  return SAFE_V141_ADDRESSES;
}

async function installSafeSingletonFactory(chain: ChainHandles): Promise<void> {
  if (await hasCode(chain, SAFE_SINGLETON_FACTORY_ADDRESS)) return;
  const proxy = await chain.publicClient.getCode({ address: CREATE2_DEPLOYER_ADDRESS });
  if (!proxy || proxy === "0x") throw new Error("the chain has no deterministic deployment proxy to copy");
  await chain.testClient.setCode({ address: SAFE_SINGLETON_FACTORY_ADDRESS, bytecode: proxy });
}

/** Sends `initCode` through a CREATE2 factory (salt 0) and checks that `expected` now has code. */
async function create2(
  chain: ChainHandles,
  factory: Address,
  initCode: Hex,
  expected: Address,
): Promise<void> {
  if (await hasCode(chain, expected)) return;
  const hash = await chain.wallets[0]!.sendTransaction({
    to: factory,
    data: concatHex([ZERO_SALT, initCode]),
  });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`CREATE2 of ${expected} through ${factory} reverted`);
  if (!(await hasCode(chain, expected))) {
    throw new Error(`CREATE2 through ${factory} left no code at ${getAddress(expected)}`);
  }
}

async function hasCode(chain: ChainHandles, address: Address): Promise<boolean> {
  const code = await chain.publicClient.getCode({ address });
  return code !== undefined && code !== "0x";
}
