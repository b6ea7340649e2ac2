/**
 * Known answers from the accounts' own encoders: each account helper in permissionless and viem
 * encodes calls exactly as the wallet would send them, and decodeCalls must give those calls
 * back. Every helper is built offline: given an address, none needs the chain, except Safe7579,
 * which asks whether the Safe is deployed (eth_getCode, answered here).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  to7702SimpleSmartAccount,
  toKernelSmartAccount,
  toNexusSmartAccount,
  toSafeSmartAccount,
  toSimpleSmartAccount,
} from "permissionless/accounts";
import { type Address, bytesToHex, createClient, custom, type Hex, numberToHex, zeroAddress } from "viem";
import {
  entryPoint06Address,
  entryPoint08Address,
  type SmartAccount,
  toCoinbaseSmartAccount,
  toSimple7702SmartAccount,
  toSoladySmartAccount,
} from "viem/account-abstraction";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";
import { type AccountEncoding, type DecodedCall, decodeCalls } from "./calls.ts";
import { MULTI_SEND_CALL_ONLY_ADDRESSES } from "./decoders/safe.ts";

interface Call {
  to: Address;
  value: bigint;
  data: Hex;
}

/** A chain-free client: the helpers under test must not need RPC, except for eth_getCode. */
function offlineClient(deployed: boolean) {
  return createClient({
    chain: foundry,
    transport: custom({
      async request({ method }) {
        if (method === "eth_chainId") return numberToHex(foundry.id);
        if (method === "eth_getCode") return deployed ? "0x6001" : "0x";
        throw new Error(`no RPC in this test: ${method}`);
      },
    }),
  });
}

const client = offlineClient(true);
const owner = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
const address = "0x1111111111111111111111111111111111111111";

// The Safe7579 adapter and launchpad as Rhinestone deploys them; any address would do offline.
const safe7579 = {
  safe4337ModuleAddress: "0x7579EE8307284F293B1927136486880611F20002",
  erc7579LaunchpadAddress: "0x7579011aB74c46090561ea277Ba79D510c6C00ff",
} as const;

interface AccountCase {
  name: string;
  single: AccountEncoding;
  batch: AccountEncoding;
  /** SimpleAccount for EntryPoint v0.6 has no values in its batch form. */
  batchDropsValues?: boolean;
  /**
   * permissionless 0.4.1's Safe decodeCalls cannot read its own MultiSend batches: it doubles
   * each data length (hex characters) and then slices bytes, so it throws or misreads.
   */
  helperMisreadsBatches?: boolean;
  make: () => Promise<SmartAccount>;
}

const ACCOUNTS: AccountCase[] = [
  {
    name: "SimpleAccount (EntryPoint v0.6)",
    single: "single_execute",
    batch: "batch_targets_datas",
    batchDropsValues: true,
    make: () =>
      toSimpleSmartAccount({
        client,
        owner,
        address,
        entryPoint: { address: entryPoint06Address, version: "0.6" },
      }),
  },
  {
    name: "SimpleAccount (EntryPoint v0.7)",
    single: "single_execute",
    batch: "batch_targets_values_datas",
    make: () => toSimpleSmartAccount({ client, owner, address }),
  },
  {
    name: "SimpleAccount (EntryPoint v0.8)",
    single: "single_execute",
    batch: "batch_calls",
    make: () =>
      toSimpleSmartAccount({
        client,
        owner,
        address,
        entryPoint: { address: entryPoint08Address, version: "0.8" },
      }),
  },
  {
    name: "Simple7702Account (viem)",
    single: "single_execute",
    batch: "batch_calls",
    make: () => toSimple7702SmartAccount({ client, owner }),
  },
  {
    name: "Simple7702Account (permissionless)",
    single: "single_execute",
    batch: "batch_calls",
    make: () => to7702SimpleSmartAccount({ client, owner }),
  },
  {
    name: "Coinbase Smart Wallet 1.1",
    single: "single_execute",
    batch: "batch_calls",
    make: () => toCoinbaseSmartAccount({ client, owners: [owner], address, version: "1.1" }),
  },
  {
    name: "Solady ERC4337",
    single: "single_execute",
    batch: "batch_calls",
    make: () => toSoladySmartAccount({ client, owner, address }),
  },
  {
    name: "Kernel v3.1",
    single: "erc7579_single",
    batch: "erc7579_batch",
    make: () => toKernelSmartAccount({ client, owners: [owner], address, version: "0.3.1" }),
  },
  {
    name: "Kernel v3.3",
    single: "erc7579_single",
    batch: "erc7579_batch",
    make: () => toKernelSmartAccount({ client, owners: [owner], address, version: "0.3.3" }),
  },
  {
    name: "Nexus 1.0",
    single: "erc7579_single",
    batch: "erc7579_batch",
    make: () => toNexusSmartAccount({ client, owners: [owner], address, version: "1.0.0" }),
  },
  {
    name: "Safe7579 (deployed)",
    single: "erc7579_single",
    batch: "erc7579_batch",
    make: () =>
      toSafeSmartAccount({ client, owners: [owner], address, version: "1.4.1", ...safe7579, attesters: [] }),
  },
  {
    name: "Safe 1.4.1 + Safe4337Module",
    helperMisreadsBatches: true,
    single: "safe_call",
    batch: "safe_multisend",
    make: () => toSafeSmartAccount({ client, owners: [owner], address, version: "1.4.1" }),
  },
  {
    name: "Safe 1.5.0 + Safe4337Module",
    helperMisreadsBatches: true,
    single: "safe_call",
    batch: "safe_multisend",
    make: () => toSafeSmartAccount({ client, owners: [owner], address, version: "1.5.0" }),
  },
  {
    name: "Safe 1.4.1 + Safe4337Module (EntryPoint v0.6)",
    helperMisreadsBatches: true,
    single: "safe_call",
    batch: "safe_multisend",
    make: () =>
      toSafeSmartAccount({
        client,
        owners: [owner],
        address,
        version: "1.4.1",
        entryPoint: { address: entryPoint06Address, version: "0.6" },
      }),
  },
];

const transfer: Call = {
  to: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
  value: 0n,
  data: "0xa9059cbb000000000000000000000000000000000000000000000000000000000000beef00000000000000000000000000000000000000000000000000000000000f4240",
};
const mintWithValue: Call = {
  to: "0x2222222222222222222222222222222222222222",
  value: 10n ** 16n,
  data: "0x1249c58b",
};
const approve: Call = {
  to: "0x3333333333333333333333333333333333333333",
  value: 0n,
  data: "0x095EA7B3000000000000000000000000000000000000000000000000000000000000cafe0000000000000000000000000000000000000000000000000000000000000001",
};

function expected(calls: readonly Call[], dropValues = false): DecodedCall[] {
  return calls.map((call) => ({
    target: call.to.toLowerCase() as Address,
    valueWei: dropValues ? 0n : call.value,
    data: call.data.toLowerCase() as Hex,
    selector: call.data.slice(0, 10).toLowerCase() as Hex,
  }));
}

describe("decodeCalls: known answers from each account's own encoder", () => {
  for (const account of ACCOUNTS) {
    it(`${account.name}: one call decodes to that call (${account.single})`, async () => {
      const callData = await (await account.make()).encodeCalls([mintWithValue]);
      assert.deepEqual(decodeCalls(callData), {
        kind: "calls",
        encoding: account.single,
        calls: expected([mintWithValue]),
      });
    });

    it(`${account.name}: a batch decodes to the same calls in order (${account.batch})`, async () => {
      const batch = [transfer, mintWithValue, approve];
      const callData = await (await account.make()).encodeCalls(batch);
      assert.deepEqual(decodeCalls(callData), {
        kind: "calls",
        encoding: account.batch,
        calls: expected(batch, account.batchDropsValues),
      });
    });
  }

  it("a Safe batch delegatecalls the MultiSendCallOnly permissionless names for its version", async () => {
    for (const [version, multiSend] of [
      ["1.4.1", "0x9641d764fc13c8b624c04430c7356c1c7c8102e2"],
      ["1.5.0", "0xa83c336b20401af773b6219ba5027174338d1836"],
    ] as const) {
      const safe = await toSafeSmartAccount({ client, owners: [owner], address, version });
      const callData = await safe.encodeCalls([transfer, approve]);
      // executeUserOpWithErrorString(to, value, data, operation): `to` is the first argument.
      assert.equal(`0x${callData.slice(34, 74)}`, multiSend);
      assert.ok(MULTI_SEND_CALL_ONLY_ADDRESSES.has(multiSend));
    }
  });

  it("refuses a Safe7579's first operation, the launchpad's setupSafe, naming it", async () => {
    const undeployed = offlineClient(false);
    const safe = await toSafeSmartAccount({
      client: undeployed,
      owners: [owner],
      address,
      version: "1.4.1",
      ...safe7579,
      attesters: [],
    });
    const result = decodeCalls(await safe.encodeCalls([transfer]));
    assert.equal(result.kind === "refused" && result.code, "unsupported_account");
    assert.match(result.kind === "refused" ? result.detail : "", /setupSafe/);
  });

  it("refuses what a Safe with an onchain identifier sends: bytes after the ABI arguments", async () => {
    const safe = await toSafeSmartAccount({
      client,
      owners: [owner],
      address,
      version: "1.4.1",
      onchainIdentifier: "0x5afe0001",
    });
    const result = decodeCalls(await safe.encodeCalls([transfer]));
    assert.equal(result.kind === "refused" && result.code, "malformed_call_data");
  });
});

const nonZeroAddress = fc
  .uint8Array({ minLength: 20, maxLength: 20 })
  .map((bytes) => bytesToHex(bytes))
  .filter((hex) => hex !== zeroAddress);
const arbitraryCall: fc.Arbitrary<Call> = fc.record({
  to: nonZeroAddress,
  value: fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }),
  data: fc.uint8Array({ minLength: 4, maxLength: 300 }).map((bytes) => bytesToHex(bytes)),
});

describe("decodeCalls: round trip through every account encoder (property)", () => {
  for (const account of ACCOUNTS) {
    it(`${account.name}: any 1..8 calls come back exactly, and agree with the helper's own decoder`, async () => {
      const smartAccount = await account.make();
      await fc.assert(
        fc.asyncProperty(fc.array(arbitraryCall, { minLength: 1, maxLength: 8 }), async (calls) => {
          const callData = await smartAccount.encodeCalls(calls);
          const result = decodeCalls(callData);
          const isBatch = calls.length > 1;
          assert.deepEqual(result, {
            kind: "calls",
            encoding: isBatch ? account.batch : account.single,
            calls: expected(calls, isBatch && account.batchDropsValues),
          });
          if (smartAccount.decodeCalls && !(isBatch && account.helperMisreadsBatches)) {
            const theirs = await smartAccount.decodeCalls(callData);
            assert.deepEqual(
              result.calls.map(({ target, valueWei, data }) => [target, valueWei, data]),
              theirs.map((call) => [call.to.toLowerCase(), call.value ?? 0n, call.data ?? "0x"]),
            );
          }
        }),
        { numRuns: 60 },
      );
    });
  }
});
