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
import { gameItemsAbi, sponsorPaymasterAbi, valueForwarderAbi } from "../support/chain/devnet.ts";

const compiled = compileContracts();

test("committed contract artifacts are exactly what the sources compile to (run npm run build:contracts)", () => {
  for (const [name, artifact] of Object.entries(compiled) as [ContractName, Artifact][]) {
    const committed = readFileSync(artifactPath(name), "utf8");
    assert.equal(committed, serializeArtifact(artifact), `${name}.json drifted from its source`);
  }
});

/** An ABI item reduced to what callers depend on: kind, name, types, indexing, outputs, mutability. */
function shape(item: Abi[number]): string {
  const params = (ps: readonly AbiParameter[] | undefined) =>
    (ps ?? []).map((p) => `${p.type}${"indexed" in p && p.indexed ? " indexed" : ""}`).join(",");
  const outputs = "outputs" in item ? params(item.outputs) : "";
  const mutability = "stateMutability" in item ? item.stateMutability : "";
  const name = "name" in item ? item.name : "";
  const inputs = "inputs" in item ? params(item.inputs) : "";
  return `${item.type} ${name}(${inputs}) ${mutability} -> (${outputs})`;
}

test("hand-written TypeScript ABIs match the compiled contracts item by item", () => {
  const pairs = [
    [sponsorPaymasterAbi, compiled.SponsorPaymaster.abi as Abi],
    [gameItemsAbi, compiled.GameItems.abi as Abi],
    [valueForwarderAbi, compiled.ValueForwarder.abi as Abi],
  ] as const;
  for (const [handWritten, fromCompiler] of pairs) {
    const known = new Set(fromCompiler.map(shape));
    for (const item of handWritten)
      assert.ok(known.has(shape(item)), `not in the compiled ABI: ${shape(item)}`);
  }
});
