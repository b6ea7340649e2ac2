/**
 * Sender code resolution (src/accounts/code) against real deployments on anvil: every known
 * implementation is recognised however the sender reaches it (factory, ERC-1967 proxy, ERC-1167
 * clone, SafeProxy, EIP-7702 delegation) with the codeHash the chain reports, and code the
 * service cannot vouch for is refused: an account that ignores its arguments, an EOA, an unknown
 * factory or delegate, a modular account with an executor.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { toSafeSmartAccount } from "permissionless/accounts";
import {
  type Address,
  concatHex,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  keccak256,
  parseAbi,
  parseEther,
  zeroHash,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { buildRegistry, REGISTRY_PATH } from "../../scripts/build-account-registry.ts";
import { FACTORY_RULES, IMPLEMENTATION_RULES } from "../../src/accounts/code/implementations.ts";
import { KNOWN_CODE } from "../../src/accounts/code/known-code.ts";
import {
  chainSenderCodeResolver,
  type SenderCode,
  type SenderCodeQuery,
  type SenderCodeResolver,
} from "../../src/accounts/code/resolve.ts";
import { createChainClient } from "../../src/chains/rpc.ts";
import { deploySafeContracts } from "../support/chain/accounts.ts";
import { type DevChain, freePort, startChain } from "../support/chain/anvil.ts";
import {
  type DevnetStack,
  deployAdversarialAccount,
  deployStack,
  ENTRY_POINT_V07_ADDRESS,
  ENTRY_POINT_V08_ADDRESS,
} from "../support/chain/devnet.ts";
import { deployModular7579Factory, toModular7579SmartAccount } from "../support/chain/modular-account.ts";
import { accountInitCode, getAccountAddress } from "../support/chain/userop.ts";

let chain: DevChain;
let stack: DevnetStack;
let modularFactory: Address;

/** A resolver with its own caches, so that one test's verdicts never answer another's. */
function resolver(): SenderCodeResolver {
  const client = createChainClient(chain.rpcUrl);
  return chainSenderCodeResolver({ client: (chainId) => (chainId === chain.chainId ? client : null) });
}

function query(q: Partial<SenderCodeQuery> & Pick<SenderCodeQuery, "sender">): SenderCodeQuery {
  return {
    chainId: chain.chainId,
    entryPoint: ENTRY_POINT_V07_ADDRESS,
    initCode: "0x",
    eip7702Delegate: null,
    ...q,
  };
}

async function codeHashOnChain(address: Address): Promise<Hex> {
  const code = await chain.publicClient.getCode({ address });
  assert.ok(code && code !== "0x", `${address} has no code`);
  return keccak256(code);
}

function assertKnown(result: SenderCode, id: string, via: string, codeHash: Hex): void {
  assert.equal(result.kind, "known", JSON.stringify(result));
  if (result.kind !== "known") return;
  assert.equal(result.implementation.id, id);
  assert.equal(result.via, via);
  assert.equal(result.codeHash, codeHash);
}

function assertRefused(result: SenderCode, detail: RegExp): void {
  assert.equal(result.kind, "refused", JSON.stringify(result));
  if (result.kind !== "refused") return;
  assert.equal(result.code, "account_not_supported");
  assert.match(result.detail, detail);
}

async function send(to: Address, data: Hex, from?: Address): Promise<void> {
  let hash: Hex;
  if (from === undefined) {
    hash = await chain.wallets[0]!.sendTransaction({ to, data });
  } else {
    await chain.testClient.impersonateAccount({ address: from });
    await chain.testClient.setBalance({ address: from, value: parseEther("1") });
    const wallet = createWalletClient({ chain: chain.chain, transport: http(chain.rpcUrl), account: from });
    hash = await wallet.sendTransaction({ to, data });
    await chain.testClient.stopImpersonatingAccount({ address: from });
  }
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, "success", `transaction to ${to} reverted`);
}

const randomOwner = () => privateKeyToAccount(generatePrivateKey());

before(async () => {
  chain = await startChain();
  stack = await deployStack(chain, { signer: chain.wallets[3]!.account.address });
  await deploySafeContracts(chain);
  modularFactory = await deployModular7579Factory(chain);
});

after(async () => {
  await chain?.stop();
});

describe("the registry", () => {
  test("the committed known-code.ts is what scripts/build-account-registry.ts generates (run it)", async () => {
    assert.equal(readFileSync(REGISTRY_PATH, "utf8"), await buildRegistry());
  });

  test("every implementation and factory rule names a registry entry of the role it assumes", () => {
    const roles = new Map(KNOWN_CODE.map((r) => [r.id, r.role]));
    for (const rule of IMPLEMENTATION_RULES) {
      for (const id of rule.codeIds)
        assert.match(roles.get(id) ?? "missing", /^(account|safe-singleton)$/, id);
    }
    for (const rule of FACTORY_RULES) {
      assert.equal(roles.get(rule.codeId), "factory", rule.codeId);
      if (rule.implementationCodeId) assert.equal(roles.get(rule.implementationCodeId), "account");
    }
  });
});

describe("known implementations", () => {
  test("SimpleAccount v0.7: counterfactual through its factory, then deployed behind ERC-1967", async () => {
    const r = resolver();
    const owner = randomOwner().address;
    const sender = await getAccountAddress(chain.publicClient, stack.accountFactory, owner);
    const initCode = accountInitCode(stack.accountFactory, owner);
    assertKnown(await r.resolve(query({ sender, initCode })), "simple-account-v0.7", "factory", zeroHash);

    await send(stack.accountFactory, `0x${initCode.slice(42)}`);
    assertKnown(
      await r.resolve(query({ sender })),
      "simple-account-v0.7",
      "erc1967",
      await codeHashOnChain(sender),
    );
    assertRefused(
      await r.resolve(query({ sender, entryPoint: ENTRY_POINT_V08_ADDRESS })),
      /serves EntryPoint 0x0000000071727De22E5E9d8BAf0edAc6f37da032/,
    );
  });

  test("SimpleAccount v0.8: counterfactual through its factory, then deployed behind ERC-1967", async () => {
    const r = resolver();
    const owner = randomOwner().address;
    const factory = stack.v08.accountFactory;
    const sender = await getAccountAddress(chain.publicClient, factory, owner);
    const initCode = accountInitCode(factory, owner);
    const v08 = { entryPoint: ENTRY_POINT_V08_ADDRESS };
    assertKnown(
      await r.resolve(query({ ...v08, sender, initCode })),
      "simple-account-v0.8",
      "factory",
      zeroHash,
    );

    const senderCreator = await chain.publicClient.readContract({
      address: ENTRY_POINT_V08_ADDRESS,
      abi: parseAbi(["function senderCreator() view returns (address)"]),
      functionName: "senderCreator",
    });
    await send(factory, `0x${initCode.slice(42)}`, senderCreator);
    const deployed = await r.resolve(query({ ...v08, sender }));
    assertKnown(deployed, "simple-account-v0.8", "erc1967", await codeHashOnChain(sender));
  });

  test("Simple7702Account: named by eip7702Auth before the delegation, then through its designator", async () => {
    const r = resolver();
    const eoa = randomOwner();
    const delegate = stack.v08.simple7702Account;
    const designatorHash = keccak256(concatHex(["0xef0100", delegate]));
    const marker: Hex = `0x7702${"00".repeat(18)}`;
    const v08 = { entryPoint: ENTRY_POINT_V08_ADDRESS, sender: eoa.address };
    const before = await r.resolve(query({ ...v08, initCode: marker, eip7702Delegate: delegate }));
    assertKnown(before, "simple-7702-account-v0.8", "eip7702", designatorHash);

    const authorization = await eoa.signAuthorization({
      address: delegate,
      chainId: chain.chainId,
      nonce: 0,
    });
    const hash = await chain.wallets[0]!.sendTransaction({
      to: eoa.address,
      authorizationList: [authorization],
    });
    await chain.publicClient.waitForTransactionReceipt({ hash });
    assert.equal(await codeHashOnChain(eoa.address), designatorHash);
    assertKnown(await r.resolve(query(v08)), "simple-7702-account-v0.8", "eip7702", designatorHash);
  });

  test("Safe 1.4.1 with the Safe4337Module: counterfactual through SafeProxyFactory, then deployed", async () => {
    const r = resolver();
    const account = await toSafeSmartAccount({
      client: chain.publicClient,
      owners: [randomOwner()],
      version: "1.4.1",
      entryPoint: { address: ENTRY_POINT_V07_ADDRESS, version: "0.7" },
    });
    const { factory, factoryData } = await account.getFactoryArgs();
    assert.ok(factory && factoryData);
    const initCode = concatHex([factory, factoryData]);
    const sender = account.address;
    assertKnown(
      await r.resolve(query({ sender, initCode })),
      "safe-1.4.1+safe4337module-0.3.0",
      "factory",
      zeroHash,
    );

    await send(factory, factoryData);
    const deployed = await r.resolve(query({ sender }));
    assertKnown(deployed, "safe-1.4.1+safe4337module-0.3.0", "safe-proxy", await codeHashOnChain(sender));
  });

  test("Modular7579Account: counterfactual through its factory, then deployed as an ERC-1167 clone", async () => {
    const r = resolver();
    const account = await toModular7579SmartAccount({
      client: chain.publicClient,
      owner: randomOwner(),
      factory: modularFactory,
    });
    const { factory, factoryData } = await account.getFactoryArgs();
    assert.ok(factory && factoryData);
    const sender = account.address;
    const initCode = concatHex([factory, factoryData]);
    assertKnown(await r.resolve(query({ sender, initCode })), "oz-account-erc7579", "factory", zeroHash);

    await send(factory, factoryData);
    const deployed = await r.resolve(query({ sender }));
    assertKnown(deployed, "oz-account-erc7579", "erc1167", await codeHashOnChain(sender));
  });
});

describe("refused: code the service cannot vouch for", () => {
  test("an account that ignores its execute arguments (AdversarialAccount) is unknown code", async () => {
    const sender = await deployAdversarialAccount(chain, 0n);
    assertRefused(await resolver().resolve(query({ sender })), /the sender's code is not known \(\d+ bytes/);
  });

  test("an EOA without code whose operation deploys nothing", async () => {
    assertRefused(
      await resolver().resolve(query({ sender: randomOwner().address })),
      /has no code and the operation deploys none/,
    );
  });

  test("a factory that is not a known account factory", async () => {
    const owner = randomOwner().address;
    const initCode = accountInitCode(stack.gameItems, owner);
    const result = await resolver().resolve(query({ sender: randomOwner().address, initCode }));
    assertRefused(result, /factory 0x[0-9a-fA-F]{40} is not a known account factory/);
  });

  test("an EIP-7702 delegate that is not a known implementation", async () => {
    const q = query({
      entryPoint: ENTRY_POINT_V08_ADDRESS,
      sender: randomOwner().address,
      eip7702Delegate: stack.gameItems,
    });
    assertRefused(await resolver().resolve(q), /EIP-7702 delegate .* is not a known implementation/);
  });

  test("a Modular7579Account with an executor module installed", async () => {
    const account = await toModular7579SmartAccount({
      client: chain.publicClient,
      owner: randomOwner(),
      factory: modularFactory,
    });
    const { factory, factoryData } = await account.getFactoryArgs();
    await send(factory!, factoryData!);
    // A module that answers 1 (true) to everything: isModuleType(2) passes and onInstall succeeds.
    const executor: Address = "0x00000000000000000000000000000000000e0ec5";
    await chain.testClient.setCode({ address: executor, bytecode: "0x600160005260206000f3" });
    const install = encodeFunctionData({
      abi: parseAbi(["function installModule(uint256 moduleTypeId, address module, bytes initData)"]),
      functionName: "installModule",
      args: [2n, executor, "0x"],
    });
    await send(account.address, install, ENTRY_POINT_V07_ADDRESS);
    assertRefused(
      await resolver().resolve(query({ sender: account.address })),
      /executor module 0x00000000000000000000000000000000000e0ec5 installed/,
    );
  });
});

describe("caching and failures", () => {
  test("concurrent resolutions share one promise, and a verdict is reused within the TTL", async () => {
    let calls = 0;
    const client = createChainClient(chain.rpcUrl);
    const counted = {
      ...client,
      getCode(args: { address: Address }) {
        calls++;
        return client.getCode(args);
      },
    };
    const r = chainSenderCodeResolver({ client: () => counted });
    const q = query({ sender: randomOwner().address });
    const [a, b] = [r.resolve(q), r.resolve(q)];
    assert.equal(a, b);
    assertRefused(await a, /has no code/);
    const afterFirst = calls;
    assertRefused(await r.resolve(q), /has no code/);
    assert.equal(calls, afterFirst, "the cached verdict answered without a chain read");
  });

  test("an RPC that fails gives unavailable, which is never cached", async () => {
    const dead = createChainClient(`http://127.0.0.1:${await freePort()}`, {
      timeoutMs: 2_000,
      retryCount: 0,
    });
    const live = createChainClient(chain.rpcUrl);
    let client = dead;
    const r = chainSenderCodeResolver({ client: () => client });
    const q = query({ sender: randomOwner().address });
    assert.equal((await r.resolve(q)).kind, "unavailable");
    client = live;
    assertRefused(await r.resolve(q), /has no code/);
    assert.equal((await resolver().resolve(query({ sender: q.sender, chainId: 1 }))).kind, "unavailable");
  });

  test("malformed input is refused without a chain read", async () => {
    const r = chainSenderCodeResolver({ client: () => null });
    const bad = query({ sender: "0x1234" as Address });
    assertRefused(await r.resolve(bad), /sender is not an address/);
    assertRefused(
      await r.resolve(query({ sender: ENTRY_POINT_V07_ADDRESS, initCode: "0x7" as Hex })),
      /not hex/,
    );
  });
});
