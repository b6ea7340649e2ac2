/**
 * Compiles the Solidity sources in contracts/ with the pinned solc-js and writes
 * contracts/artifacts/<Name>.json = {abi, bytecode}. The output is byte-for-byte reproducible,
 * so test/chain/artifacts.test.ts can recompile and fail when the committed artifacts drift.
 *
 * Usage: npm run build:contracts
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, normalize, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import solc from "solc";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** A rebuild with another compiler would silently change the bytecode; refuse instead. */
export const SOLC_VERSION = "0.8.37";

/** The contracts that get an artifact, by source unit (relative to the repository root). */
export const CONTRACT_SOURCES = {
  SponsorPaymaster: "contracts/SponsorPaymaster.sol",
  SponsorPaymasterV08: "contracts/SponsorPaymasterV08.sol",
  GameItems: "contracts/test/GameItems.sol",
  ValueForwarder: "contracts/test/ValueForwarder.sol",
  AdversarialAccount: "contracts/test/AdversarialAccount.sol",
  BundleForwarder: "contracts/test/BundleForwarder.sol",
  Modular7579Account: "contracts/test/Modular7579Account.sol",
  Modular7579AccountFactory: "contracts/test/Modular7579Account.sol",
  LyingAccount: "contracts/test/LyingAccount.sol",
  LyingDelegate: "contracts/test/LyingAccount.sol",
  SideEffectFactory: "contracts/test/SideEffectFactory.sol",
  FallbackExecutorModule: "contracts/test/Rogue7579Modules.sol",
  PreCheckHook: "contracts/test/Rogue7579Modules.sol",
  Hooked7579Account: "contracts/test/Rogue7579Modules.sol",
} as const;

export type ContractName = keyof typeof CONTRACT_SOURCES;

/**
 * One compilation per EntryPoint version. The paymaster's logic lives once, in
 * contracts/SponsorPaymasterCore.sol, whose imports name `@account-abstraction/contracts/` (the
 * v0.7 release). The v0.8 build remaps that prefix to the v0.8 release installed under the alias
 * `@account-abstraction/contracts-v08`, so the same core compiles against v0.8's BasePaymaster
 * and PackedUserOperation. Remappings are per compilation, not per file (a unit imported from
 * two builds resolves its imports once), hence two compilations.
 *
 * Both builds take OpenZeppelin from the root install (5.0.2, pinned): the v0.8 release asks for
 * ^5.1.0 for its EntryPoint (ReentrancyGuardTransient), which is deployed from the release
 * artifact, not compiled here; what its BasePaymaster uses (Ownable2Step, IERC165) is in 5.0.2.
 *
 * The test ERC-7579 account (contracts/test/Modular7579Account.sol) is OpenZeppelin 5.7's
 * AccountERC7579, installed under the alias `@openzeppelin/contracts-v5x` and imported by that
 * name, so it joins the v0.7 build without a remapping. A remapping would not do: the remappings
 * are written into every contract's metadata, whose hash ends the bytecode, so even one scoped to
 * the account's file would change the paymaster's artifact.
 */
export const CONTRACT_BUILDS: readonly { name: string; remappings: string[]; contracts: ContractName[] }[] = [
  {
    name: "EntryPoint v0.7",
    remappings: [],
    contracts: [
      "SponsorPaymaster",
      "GameItems",
      "ValueForwarder",
      "AdversarialAccount",
      "BundleForwarder",
      "Modular7579Account",
      "Modular7579AccountFactory",
      "LyingAccount",
      "LyingDelegate",
      "SideEffectFactory",
      "FallbackExecutorModule",
      "PreCheckHook",
      "Hooked7579Account",
    ],
  },
  {
    name: "EntryPoint v0.8",
    remappings: ["@account-abstraction/contracts/=@account-abstraction/contracts-v08/"],
    contracts: ["SponsorPaymasterV08"],
  },
];

export interface Artifact {
  abi: unknown[];
  bytecode: `0x${string}`;
}

export const ARTIFACTS_DIR = join(ROOT, "contracts", "artifacts");

const compilerSettings = {
  // Cancun is the newest fork Sonic and the other target chains all run; anvil runs it too.
  evmVersion: "cancun",
  optimizer: { enabled: true, runs: 10_000 },
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
};

/** Import paths are source unit names: first the repository, then node_modules packages. */
function readImport(unitName: string): { contents: string } | { error: string } {
  const clean = normalize(unitName);
  if (clean.startsWith("..")) return { error: `import outside the repository: ${unitName}` };
  for (const base of [ROOT, join(ROOT, "node_modules")]) {
    const path = join(base, clean);
    if (existsSync(path)) return { contents: readFileSync(path, "utf8") };
  }
  return { error: `not found: ${unitName}` };
}

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>>;
}

/** Compiles every contract in CONTRACT_SOURCES and returns the artifacts without writing them. */
export function compileContracts(): Record<ContractName, Artifact> {
  const version: string = solc.version();
  if (!version.startsWith(`${SOLC_VERSION}+`)) {
    throw new Error(`expected solc ${SOLC_VERSION}, found ${version}`);
  }
  const artifacts = {} as Record<ContractName, Artifact>;
  for (const build of CONTRACT_BUILDS) Object.assign(artifacts, compileBuild(build));
  const missing = (Object.keys(CONTRACT_SOURCES) as ContractName[]).filter((name) => !artifacts[name]);
  if (missing.length > 0) throw new Error(`in no build: ${missing.join(", ")}`);
  return artifacts;
}

function compileBuild(build: (typeof CONTRACT_BUILDS)[number]): Partial<Record<ContractName, Artifact>> {
  const sources = Object.fromEntries(
    build.contracts.map((name) => {
      const unit = CONTRACT_SOURCES[name];
      return [unit, { content: readFileSync(join(ROOT, unit), "utf8") }];
    }),
  );
  const settings = { ...compilerSettings, remappings: build.remappings };
  const input = { language: "Solidity", sources, settings };
  const output: SolcOutput = JSON.parse(solc.compile(JSON.stringify(input), { import: readImport }));

  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(`${build.name}:\n${errors.map((e) => e.formattedMessage).join("\n")}`);
  }
  const artifacts: Partial<Record<ContractName, Artifact>> = {};
  for (const name of build.contracts) {
    const compiled = output.contracts[CONTRACT_SOURCES[name]]?.[name];
    if (!compiled) throw new Error(`solc produced no output for ${name}`);
    artifacts[name] = { abi: compiled.abi, bytecode: `0x${compiled.evm.bytecode.object}` };
  }
  return artifacts;
}

/** The exact bytes written to disk: two-space JSON with a trailing newline. */
export function serializeArtifact(artifact: Artifact): string {
  return `${JSON.stringify({ abi: artifact.abi, bytecode: artifact.bytecode }, null, 2)}\n`;
}

export function artifactPath(name: ContractName): string {
  return join(ARTIFACTS_DIR, `${name}.json`);
}

function main(): void {
  const artifacts = compileContracts();
  for (const [name, artifact] of Object.entries(artifacts) as [ContractName, Artifact][]) {
    writeFileSync(artifactPath(name), serializeArtifact(artifact));
    console.log(`wrote ${artifactPath(name)} (${(artifact.bytecode.length - 2) / 2} bytes of init code)`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
