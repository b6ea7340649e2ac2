// Which chain a project's page is about. A project keeps one gas tank per chain, each in its
// chain's own currency, so a page that shows the tank's money shows one chain's at a time: the
// project's home chain unless the address names another (`?chain=<id>` in the hash).

/** What an amount is shown in when nothing better is known: wei with no symbol. */
const UNKNOWN_CURRENCY = { symbol: "", decimals: 18 };

/**
 * The currency of `chainId` among the chains served here. A chain not served (a project's home
 * chain that no longer is, a record from before chains were recorded) is shown in the first
 * served chain's currency, as the API formats it.
 */
export function currencyOf(chains, chainId) {
  const chain = chains.find((c) => c.chainId === chainId) ?? chains[0];
  return chain?.nativeCurrency ?? UNKNOWN_CURRENCY;
}

/**
 * The chains a switcher offers and the one chosen. Every served chain is offered as
 * `Name (chainId)`; a home chain no longer served is offered too, first, since its tank still
 * holds money. `requested` is the address's `chain` (a string or null): a chain not offered is
 * reported as `unknown` and the home chain is chosen instead.
 */
export function chainChoice(chains, homeChainId, requested) {
  const offered = chains.map((c) => ({
    chainId: c.chainId,
    name: c.name,
    label: `${c.name} (${c.chainId})`,
    currency: c.nativeCurrency,
  }));
  if (!offered.some((c) => c.chainId === homeChainId)) {
    offered.unshift({
      chainId: homeChainId,
      name: `chain ${homeChainId}`,
      label: `Home chain (${homeChainId}), no longer served`,
      currency: currencyOf(chains, homeChainId),
    });
  }
  const home = offered.find((c) => c.chainId === homeChainId);
  const asked = requested === null || requested === "" ? null : requested;
  const named = asked === null ? undefined : offered.find((c) => String(c.chainId) === asked);
  return { offered, selected: named ?? home, unknown: asked !== null && !named ? asked : null };
}

/** `path` asking for one chain's figures (`chainId=`), or unchanged when no chain is chosen. */
export function withChainId(path, chainId) {
  if (chainId === null || chainId === undefined) return path;
  return `${path}${path.includes("?") ? "&" : "?"}chainId=${encodeURIComponent(String(chainId))}`;
}
