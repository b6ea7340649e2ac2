/** Local chain for tests and the demo (the implementation is in ./chain/). */
export {
  type DevChain,
  type DevWalletClient,
  type StartChainOptions,
  startChain,
} from "./chain/anvil.ts";
export { type DeployStackOptions, type DevnetStack, deployStack } from "./chain/devnet.ts";
