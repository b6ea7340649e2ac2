/**
 * Writes src/accounts/code/known-code.ts, the registry of runtime code the service recognises
 * (src/accounts/code/bytecode.ts explains the matching). The production server has no
 * devDependencies, so the references are read here, from the release packages, and committed;
 * test/chain/account-code.test.ts regenerates them and fails on drift.
 *
 *   npx tsx scripts/build-account-registry.ts
 *
 * Every reference is the runtime a real deployment has on a throwaway anvil chain: some release
 * contracts only exist as code their factory writes (the ERC1967Proxy inside SimpleAccountFactory,
 * an OpenZeppelin clone's implementation), and a deployment with known constructor arguments is
 * what tells which PUSH32 argument holds which immutable (its value is the EntryPoint, the
 * contract's own address, ...). Where the package ships `deployedBytecode` (immutables zeroed),
 * the masked runtime must equal it byte for byte, so the chain ran the release build and every
 * window we mask is an immutable and nothing else.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import {
  type Address,
  createWalletClient,
  encodeFunctionData,
  getAddress,
  type Hex,
  http,
  keccak256,
  pad,
  parseAbi,
  parseEther,
} from "viem";
import {
  type CodeReference,
  type CodeRole,
  hexToBytes,
  maskWindows,
  push32Arguments,
} from "../src/accounts/code/bytecode.ts";
import { deploySafeContracts, SAFE_V141_ADDRESSES } from "../test/support/chain/accounts.ts";
import { type DevChain, startChain } from "../test/support/chain/anvil.ts";
import { type DevnetStack, deployStack } from "../test/support/chain/devnet.ts";
import { deployModular7579Factory } from "../test/support/chain/modular-account.ts";

export const REGISTRY_PATH = fileURLToPath(new URL("../src/accounts/code/known-code.ts", import.meta.url));

const factoryAbi = parseAbi([
  "function accountImplementation() view returns (address)",
  "function createAccount(address owner, uint256 salt) returns (address)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);
const entryPointV08Abi = parseAbi(["function senderCreator() view returns (address)"]);
const safeProxyFactoryAbi = parseAbi([
  "function createProxyWithNonce(address singleton, bytes initializer, uint256 saltNonce) returns (address)",
  "event ProxyCreation(address indexed proxy, address singleton)",
]);

const SAFE_CONTRACTS = "@safe-global/safe-contracts@1.4.1 build/artifacts/contracts";
const SAFE_4337 = "@safe-global/safe-4337@0.3.0 build/artifacts/contracts";
const AA_07 = "@account-abstraction/contracts@0.7.0 artifacts";
const AA_08 = "@account-abstraction/contracts@0.8.0 artifacts";

interface Source {
  id: string;
  role: CodeRole;
  /** "<package>@<version> <folder>" and the artifact's path in the folder, when a package ships it. */
  artifact?: { pkg: string; path: string };
  /** Where the contract is when it is not an npm artifact. */
  origin?: string;
  address: Address;
  /** The values the immutables were set to on this chain, by name. */
  immutables: Record<string, Address>;
}

async function sources(chain: DevChain, stack: DevnetStack): Promise<Source[]> {
  const read = (address: Address, functionName: "accountImplementation") =>
    chain.publicClient.readContract({ address, abi: factoryAbi, functionName });
  const ep07 = stack.entryPoint;
  const ep08 = stack.v08.entryPoint;
  const impl07 = await read(stack.accountFactory, "accountImplementation");
  const impl08 = await read(stack.v08.accountFactory, "accountImplementation");
  const senderCreator08 = await chain.publicClient.readContract({
    address: ep08,
    abi: entryPointV08Abi,
    functionName: "senderCreator",
  });
  const modularFactory = await deployModular7579Factory(chain);
  const modularImpl = await read(modularFactory, "accountImplementation");
  const safe = await deploySafeContracts(chain);
  const safeL2 = await deployArtifact(chain, SAFE_CONTRACTS, "SafeL2.sol/SafeL2.json");
  const proxy07 = await createSimpleAccount(chain, stack.accountFactory, null);
  const proxy08 = await createSimpleAccount(chain, stack.v08.accountFactory, senderCreator08);
  const safeProxy = await createSafeProxy(chain);
  const aa07 = (path: string) => ({ pkg: AA_07, path });
  const aa08 = (path: string) => ({ pkg: AA_08, path });
  const safeArtifact = (path: string) => ({ pkg: SAFE_CONTRACTS, path });
  return [
    {
      id: "simple-account-v0.7",
      role: "account",
      // The factory's build, not SimpleAccount.json's: that one is another compilation (6,784
      // bytes against 7,792), which no release factory deploys.
      origin: `SimpleAccount as ${AA_07}/SimpleAccountFactory.json deploys it`,
      address: impl07,
      immutables: { entryPoint: ep07, self: impl07 },
    },
    {
      id: "simple-account-v0.8",
      role: "account",
      // The factory's build: SimpleAccount.json differs from it in the metadata hash.
      origin: `SimpleAccount as ${AA_08}/SimpleAccountFactory.json deploys it`,
      address: impl08,
      immutables: { entryPoint: ep08, self: impl08 },
    },
    {
      id: "simple-7702-account-v0.8",
      role: "account",
      artifact: aa08("Simple7702Account.json"),
      address: stack.v08.simple7702Account,
      immutables: {},
    },
    {
      id: "oz-account-erc7579",
      role: "account",
      origin:
        "contracts/test/Modular7579Account.sol (OpenZeppelin Contracts 5.7 AccountERC7579), contracts/artifacts/Modular7579Account.json",
      address: modularImpl,
      immutables: {},
    },
    {
      id: "erc1967-proxy-simple-account-v0.7",
      role: "erc1967-proxy",
      origin: `ERC1967Proxy as ${AA_07}/SimpleAccountFactory.json deploys it`,
      address: proxy07,
      immutables: {},
    },
    {
      id: "erc1967-proxy-simple-account-v0.8",
      role: "erc1967-proxy",
      origin: `ERC1967Proxy as ${AA_08}/SimpleAccountFactory.json deploys it`,
      address: proxy08,
      immutables: {},
    },
    {
      id: "safe-proxy-1.4.1",
      role: "safe-proxy",
      artifact: safeArtifact("proxies/SafeProxy.sol/SafeProxy.json"),
      address: safeProxy,
      immutables: {},
    },
    {
      id: "safe-1.4.1",
      role: "safe-singleton",
      artifact: safeArtifact("Safe.sol/Safe.json"),
      address: safe.safeSingleton,
      immutables: {},
    },
    {
      id: "safe-l2-1.4.1",
      role: "safe-singleton",
      artifact: safeArtifact("SafeL2.sol/SafeL2.json"),
      address: safeL2,
      immutables: {},
    },
    {
      id: "safe-4337-module-0.3.0",
      role: "safe-module",
      artifact: { pkg: SAFE_4337, path: "Safe4337Module.sol/Safe4337Module.json" },
      address: safe.safe4337Module,
      immutables: { entryPoint: ep07 },
    },
    {
      id: "safe-module-setup-0.3.0",
      role: "safe-setup",
      artifact: { pkg: SAFE_4337, path: "SafeModuleSetup.sol/SafeModuleSetup.json" },
      address: safe.safeModuleSetup,
      immutables: {},
    },
    {
      id: "safe-multi-send-1.4.1",
      role: "safe-setup",
      artifact: safeArtifact("libraries/MultiSend.sol/MultiSend.json"),
      address: safe.multiSend,
      immutables: { self: safe.multiSend },
    },
    {
      id: "simple-account-factory-v0.7",
      role: "factory",
      artifact: aa07("SimpleAccountFactory.json"),
      address: stack.accountFactory,
      immutables: { accountImplementation: impl07 },
    },
    {
      id: "simple-account-factory-v0.8",
      role: "factory",
      artifact: aa08("SimpleAccountFactory.json"),
      address: stack.v08.accountFactory,
      immutables: { accountImplementation: impl08, senderCreator: senderCreator08 },
    },
    {
      id: "safe-proxy-factory-1.4.1",
      role: "factory",
      artifact: safeArtifact("proxies/SafeProxyFactory.sol/SafeProxyFactory.json"),
      address: safe.safeProxyFactory,
      immutables: {},
    },
    {
      id: "oz-account-erc7579-factory",
      role: "factory",
      origin: "contracts/test/Modular7579Account.sol Modular7579AccountFactory",
      address: modularFactory,
      immutables: { accountImplementation: modularImpl },
    },
  ];
}

/** The reference of one deployed contract, checked against its package's artifact. */
async function reference(chain: DevChain, s: Source): Promise<CodeReference> {
  const code = await chain.publicClient.getCode({ address: s.address });
  assert.ok(code && code !== "0x", `${s.id}: no code at ${s.address}`);
  const runtime = hexToBytes(code);
  const immutables: Record<string, number[]> = {};
  for (const [name, value] of Object.entries(s.immutables)) {
    const word = hexToBytes(pad(value.toLowerCase() as Hex, { size: 32 }));
    immutables[name] = push32Arguments(runtime, (arg) => Buffer.compare(arg, word) === 0);
    assert.ok(immutables[name].length > 0, `${s.id}: no PUSH32 holds its ${name} (${value})`);
  }
  const masked = maskWindows(runtime, Object.values(immutables).flat());
  if (s.artifact) {
    const shipped = packageArtifact(s.artifact.pkg, s.artifact.path).deployedBytecode.toLowerCase();
    assert.equal(
      `0x${Buffer.from(masked).toString("hex")}`,
      shipped,
      `${s.id}: the masked runtime is not the package's deployedBytecode`,
    );
  }
  return {
    id: s.id,
    role: s.role,
    source: s.artifact ? `${s.artifact.pkg}/${s.artifact.path}` : (s.origin ?? ""),
    lengthBytes: runtime.length,
    maskedKeccak: keccak256(masked),
    immutables,
  };
}

function packageArtifact(pkg: string, path: string): { bytecode: Hex; deployedBytecode: Hex } {
  const [nameAtVersion, folder] = pkg.split(" ") as [string, string];
  const name = nameAtVersion.slice(0, nameAtVersion.lastIndexOf("@"));
  const version = nameAtVersion.slice(nameAtVersion.lastIndexOf("@") + 1);
  // The v0.8 contracts are installed under an npm alias beside v0.7.
  const installed = name === "@account-abstraction/contracts" && version === "0.8.0" ? `${name}-v08` : name;
  const require = createRequire(import.meta.url);
  const pkgJson = require(`${installed}/package.json`) as { version: string };
  assert.equal(
    pkgJson.version,
    version,
    `${installed} is ${pkgJson.version}, the registry is built from ${version}`,
  );
  return require(`${installed}/${folder}/${path}`);
}

async function deployArtifact(chain: DevChain, pkg: string, path: string): Promise<Address> {
  const { bytecode } = packageArtifact(pkg, path);
  const hash = await chain.wallets[0]!.sendTransaction({ data: bytecode, to: null });
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.ok(receipt.contractAddress, `deploying ${path} failed`);
  return getAddress(receipt.contractAddress);
}

/** A SimpleAccount proxy; v0.8's factory only serves its SenderCreator, impersonated here. */
async function createSimpleAccount(
  chain: DevChain,
  factory: Address,
  caller: Address | null,
): Promise<Address> {
  const owner = chain.wallets[2]!.account.address;
  const data = encodeFunctionData({ abi: factoryAbi, functionName: "createAccount", args: [owner, 0n] });
  let hash: Hex;
  if (caller === null) {
    hash = await chain.wallets[0]!.sendTransaction({ to: factory, data });
  } else {
    await chain.testClient.impersonateAccount({ address: caller });
    await chain.testClient.setBalance({ address: caller, value: parseEther("1") });
    const wallet = createWalletClient({ chain: chain.chain, transport: http(chain.rpcUrl), account: caller });
    hash = await wallet.sendTransaction({ to: factory, data });
    await chain.testClient.stopImpersonatingAccount({ address: caller });
  }
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success", `createAccount on ${factory} reverted`);
  return chain.publicClient.readContract({
    address: factory,
    abi: factoryAbi,
    functionName: "getAddress",
    args: [owner, 0n],
  });
}

/** A bare SafeProxy (an empty initializer runs no setup): only its runtime is wanted. */
async function createSafeProxy(chain: DevChain): Promise<Address> {
  const { result, request } = await chain.publicClient.simulateContract({
    account: chain.wallets[0]!.account,
    address: SAFE_V141_ADDRESSES.safeProxyFactory,
    abi: safeProxyFactoryAbi,
    functionName: "createProxyWithNonce",
    args: [SAFE_V141_ADDRESSES.safeSingleton, "0x", 0n],
  });
  const hash = await chain.wallets[0]!.writeContract(request);
  await chain.publicClient.waitForTransactionReceipt({ hash });
  return result;
}

/** The registry's source text, formatted as the committed file is. */
export async function buildRegistry(): Promise<string> {
  const chain = await startChain();
  try {
    const stack = await deployStack(chain, { signer: chain.wallets[3]!.account.address });
    const refs: CodeReference[] = [];
    for (const s of await sources(chain, stack)) refs.push(await reference(chain, s));
    const seen = new Map<string, string>();
    for (const r of refs) {
      const other = seen.get(`${r.lengthBytes}:${r.maskedKeccak}`);
      assert.equal(
        other,
        undefined,
        `${r.id} has the same code as ${other}: one reference would shadow the other`,
      );
      seen.set(`${r.lengthBytes}:${r.maskedKeccak}`, r.id);
    }
    return format(render(refs));
  } finally {
    await chain.stop();
  }
}

function render(refs: readonly CodeReference[]): string {
  return [
    "// Generated by scripts/build-account-registry.ts from the release packages it names; do not edit.",
    "// test/chain/account-code.test.ts fails when this file and a regeneration differ.",
    'import type { CodeReference } from "./bytecode.ts";',
    "",
    `export const KNOWN_CODE: readonly CodeReference[] = ${JSON.stringify(refs, null, 2)};`,
    "",
  ].join("\n");
}

function format(source: string): string {
  const require = createRequire(import.meta.url);
  const biome = require.resolve("@biomejs/biome/bin/biome");
  const out = spawnSync(process.execPath, [biome, "format", `--stdin-file-path=${REGISTRY_PATH}`], {
    input: source,
    encoding: "utf8",
  });
  assert.equal(out.status, 0, `biome format failed: ${out.stderr}`);
  return out.stdout;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(REGISTRY_PATH, await buildRegistry());
  console.log(`wrote ${REGISTRY_PATH}`);
}
