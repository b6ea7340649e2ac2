import type { Config } from "../config.ts";
import type { Queryable } from "../db/db.ts";
import { notFound } from "../http/problem.ts";
import { homeChainOf } from "./store.ts";

type Chains = Config["chains"];

/**
 * The chain a view of a project answers for: the one asked, when the service serves it or it is
 * the project's home chain (404 otherwise: a chain unknown here has no figures to show), else the
 * home chain. Analytics, the balance and the low-balance threshold all choose their chain so.
 */
export function viewedChain(chains: Chains, home: number, asked: number | undefined): number {
  if (asked === undefined || asked === home) return home;
  if (!chains.some((c) => c.chainId === asked)) throw notFound("chain");
  return asked;
}

/** viewedChain, reading the project's home chain only when it decides; 404 when the project does not exist. */
export async function chainOfView(
  db: Queryable,
  chains: Chains,
  projectId: string,
  asked: number | undefined,
): Promise<number> {
  // A chain served here needs no read: the project's existence is checked by the caller.
  if (asked !== undefined && chains.some((c) => c.chainId === asked)) return asked;
  const home = await homeChainOf(db, projectId);
  if (home === null) throw notFound("project");
  return viewedChain(chains, home, asked);
}

/**
 * A chain's settings. A home chain no longer served keeps its id and shows the first served
 * chain's currency, as before chains had tanks of their own.
 */
export function chainSettingsOf(chains: Chains, chainId: number): Chains[number] {
  return chains.find((c) => c.chainId === chainId) ?? { ...chains[0]!, chainId };
}
