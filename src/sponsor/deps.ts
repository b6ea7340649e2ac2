/**
 * What the sponsorship use cases need from the running service, built once per set of services
 * and shared by `POST /sponsor/authorize`, `POST /sponsor/check` and the ERC-7677 methods: the
 * same fee ceilings, the same cached project read (one SQL statement, projects/store.ts), the
 * same dry run and approval webhook.
 */
import { type ReadThroughCache, readThroughCache } from "../caching.ts";
import type { Services } from "../context.ts";
import { dryRunReservation } from "../ledger/ledger.ts";
import { readSponsorTerms } from "../projects/store.ts";
import type { AuthorizeDeps, ProjectSponsorTerms } from "./authorize.ts";
import type { CheckDeps } from "./check.ts";
import type { OperationDeps } from "./operation.ts";
import { currentFeeCeilings } from "./pricing.ts";

export type SponsorDeps = AuthorizeDeps & CheckDeps & OperationDeps;

const built = new WeakMap<Services, SponsorDeps>();
const caches = new WeakMap<Services, ReadThroughCache<ProjectSponsorTerms>>();

/** Drops a project's cached terms on this instance (after its settings changed here). */
export function forgetSponsorTerms(services: Services, projectId: string): void {
  caches.get(services)?.forget(projectId);
}

export function sponsorDeps(services: Services): SponsorDeps {
  let deps = built.get(services);
  if (!deps) {
    deps = build(services);
    built.set(services, deps);
  }
  return deps;
}

function build(services: Services): SponsorDeps {
  const { db, config } = services;
  const terms = termsCache(services);
  return {
    config,
    signer: services.signer,
    reservations: services.reservations,
    feeCeilings: (chainId) => currentFeeCeilings(services.feeOracle, config.chains, chainId),
    refreshFees: () => services.feeOracle.refresh(),
    projectTerms: terms.get,
    senderCode: services.senderCode,
    dryRun: (r) => dryRunReservation(db, r),
    approve: services.approvals.check,
    now: services.now,
  };
}

/**
 * Each project's name, icon, validity TTL and unknown-account setting, cached briefly: they are
 * read on every authorization and change rarely. A change made through this instance applies at
 * once (forgetSponsorTerms), one made through another within the cache lifetime
 * (KEY_CACHE_TTL_MS, 2 s by default). Requests that miss together share one read (caching.ts).
 */
function termsCache(services: Services): ReadThroughCache<ProjectSponsorTerms> {
  const cache = readThroughCache({
    max: 10_000,
    ttlMs: services.config.keyCacheTtlMs,
    now: services.now,
    load: (projectId) => readSponsorTerms(services.db, projectId),
  });
  caches.set(services, cache);
  return cache;
}
