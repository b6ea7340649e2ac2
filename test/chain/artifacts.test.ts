import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import type { Abi, AbiParameter } from "viem";
import {
  type Artifact,
  artifactPath,
  type ContractName,
  compileContracts,
  serializeArtifact,
} from "../../scripts/build-contracts.ts";
import {
  adversarialAccountAbi,
  bundleForwarderAbi,
  gameItemsAbi,
  sponsorPaymasterAbi,
  valueForwarderAbi,
} from "../support/chain/devnet.ts";

const compiled = compileContracts();

test("committed contract artifacts are exactly what the sources compile to (run npm run build:contracts)", () => {
  for (const [name, artifact] of Object.entries(compiled) as [ContractName, Artifact][]) {
    const committed = readFileSync(artifactPath(name), "utf8");
    assert.equal(committed, serializeArtifact(artifact), `${name}.json drifted from its source`);
  }
});

/** A parameter's type with tuples spelled out, so a struct that gained or lost a field differs. */
function typeOf(p: AbiParameter): string {
  if (!p.type.startsWith("tuple") || !("components" in p)) return p.type;
  return `(${p.components.map(typeOf).join(",")})${p.type.slice("tuple".length)}`;
}

/** An ABI item reduced to what callers depend on: kind, name, types, indexing, outputs, mutability. */
function shape(item: Abi[number]): string {
  const params = (ps: readonly AbiParameter[] | undefined) =>
    (ps ?? []).map((p) => `${typeOf(p)}${"indexed" in p && p.indexed ? " indexed" : ""}`).join(",");
  const outputs = "outputs" in item ? params(item.outputs) : "";
  const mutability = "stateMutability" in item ? item.stateMutability : "";
  const name = "name" in item ? item.name : "";
  const inputs = "inputs" in item ? params(item.inputs) : "";
  return `${item.type} ${name}(${inputs}) ${mutability} -> (${outputs})`;
}

test("hand-written TypeScript ABIs match the compiled contracts item by item (structs field by field)", () => {
  const pairs = [
    [sponsorPaymasterAbi, compiled.SponsorPaymaster.abi as Abi],
    [gameItemsAbi, compiled.GameItems.abi as Abi],
    [valueForwarderAbi, compiled.ValueForwarder.abi as Abi],
    [adversarialAccountAbi, compiled.AdversarialAccount.abi as Abi],
    [bundleForwarderAbi, compiled.BundleForwarder.abi as Abi],
  ] as const;
  for (const [handWritten, fromCompiler] of pairs) {
    const known = new Set(fromCompiler.map(shape));
    for (const item of handWritten)
      assert.ok(known.has(shape(item)), `not in the compiled ABI: ${shape(item)}`);
  }
});

test("the SponsorPaymaster ABI covers every event and error the contract can emit or revert with", () => {
  // Settlement decodes the events and tests decode the errors; a missing one would decode as unknown.
  const handWritten = new Set(sponsorPaymasterAbi.map(shape));
  const inherited = new Set([
    // OpenZeppelin's Ownable and EIP712 (its ShortStrings): not ours to decode.
    "OwnershipTransferred",
    "OwnableUnauthorizedAccount",
    "OwnableInvalidOwner",
    "EIP712DomainChanged",
    "InvalidShortString",
    "StringTooLong",
  ]);
  const ownErrorsAndEvents = (compiled.SponsorPaymaster.abi as Abi).filter(
    (item) => (item.type === "event" || item.type === "error") && !inherited.has(item.name),
  );
  for (const item of ownErrorsAndEvents)
    assert.ok(handWritten.has(shape(item)), `missing from src/paymaster/abi.ts: ${shape(item)}`);
});
