/**
 * What the sponsorship use cases need from the running service, built once per set of services
 * and shared by `POST /sponsor/authorize`, `POST /sponsor/check` and the ERC-7677 methods: the
 * same fee ceilings, the same project reads (one SQL statement, projects/store.ts), the same dry
 * run and approval webhook.
 */
import { firstNotAllowlisted } from "../allowlists/store.ts";
import type { Services } from "../context.ts";
import { dryRunReservation } from "../ledger/ledger.ts";
import { readSponsorTerms } from "../projects/store.ts";
import type { AuthorizeDeps, ProjectSponsorTerms } from "./authorize.ts";
import type { CheckDeps } from "./check.ts";
import type { OperationDeps } from "./operation.ts";
import { currentFeeCeilings } from "./pricing.ts";

export type SponsorDeps = AuthorizeDeps & CheckDeps & OperationDeps;

const built = new WeakMap<Services, SponsorDeps>();

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
    // The whole-operation path reads the balance too (its early refusal of an empty tank), so
    // it reads the project afresh.
    project: (projectId) => readSponsorTerms(db, projectId),
    senderCode: services.senderCode,
    firstNotAllowlisted: (projectId, calls) => firstNotAllowlisted(db, projectId, calls),
    dryRun: (r) => dryRunReservation(db, r),
    approve: services.approvals.check,
    now: services.now,
  };
}

/**
 * The validity TTL and unknown-account setting of each project, cached briefly: they are read on
 * every authorization and change rarely. A change on another instance applies within the cache
 * lifetime (KEY_CACHE_TTL_MS, 2 s by default).
 */
function termsCache(services: Services) {
  const cache = new Map<string, { terms: ProjectSponsorTerms; expiresAt: number }>();
  const lifetimeMs = services.config.keyCacheTtlMs;
  return {
    async get(projectId: string): Promise<ProjectSponsorTerms> {
      const t = services.now();
      const hit = cache.get(projectId);
      if (hit && hit.expiresAt > t) return hit.terms;
      const read = await readSponsorTerms(services.db, projectId);
      const terms: ProjectSponsorTerms = { ttlSec: read.ttlSec, unknownAccounts: read.unknownAccounts };
      if (cache.size > 10_000) cache.clear();
      cache.set(projectId, { terms, expiresAt: t + lifetimeMs });
      return terms;
    },
  };
}
