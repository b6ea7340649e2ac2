/** Local chain for tests: the implementation lives in src/chains so the demo can share it. */
export {
  type DevChain,
  type DevWalletClient,
  type StartChainOptions,
  startChain,
} from "../../src/chains/anvil.ts";
export { type DeployStackOptions, type DevnetStack, deployStack } from "../../src/chains/devnet.ts";
