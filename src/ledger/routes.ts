import { Type } from "@sinclair/typebox";
import { authorizeOrg, authorizeProject } from "../access/guard.ts";
import { scopeAllows } from "../access/roles.ts";
import type { Scope } from "../api-keys/format.ts";
import type { RoutePlugin } from "../context.ts";
import type { Queryable } from "../db/db.ts";
import { forbidden, notFound } from "../http/problem.ts";
import { bearer, ProjectParams, responses, Timestamp } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { type ParityReport, parity } from "./ledger.ts";

const SignedWei = Type.String({ pattern: "^-?(0|[1-9][0-9]{0,78})$" });
const ChainReport = Type.Object({
  chainId: Type.Integer(),
  ledgerBalance: SignedWei,
  cachedBalance: SignedWei,
  delta: SignedWei,
  inSync: Type.Boolean(),
});
const Report = Type.Object(
  {
    projectId: Type.String(),
    ledgerBalance: SignedWei,
    cachedBalance: SignedWei,
    delta: SignedWei,
    inSync: Type.Boolean({ description: "The home chain's tank agrees with its ledger" }),
    chains: Type.Array(ChainReport, {
      description: "Every tank of the project, the home chain's first, each in its chain's currency",
    }),
  },
  { $id: "FundsParityReport" },
);
const MultiReport = Type.Object({
  generatedAt: Timestamp,
  total: Type.Integer({ description: "Projects checked" }),
  driftCount: Type.Integer({
    description: "Projects whose cached balance disagrees with the ledger, on any chain",
  }),
  projects: Type.Array(Report),
});
const DriftQuery = Type.Object(
  { onlyDrift: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);

export const parityRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["funds parity"];
  const summarise = (reports: ParityReport[], onlyDrift: boolean | undefined) => {
    // A project drifts when any of its tanks does (its `chains` say which).
    const drifting = reports.filter((r) => r.chains.some((c) => !c.inSync));
    return {
      generatedAt: new Date(services.now()).toISOString(),
      total: reports.length,
      driftCount: drifting.length,
      projects: onlyDrift ? drifting : reports,
    };
  };

  app.get(
    "/projects/:id/funds/parity",
    {
      schema: {
        tags,
        security: bearer,
        description:
          "The ledger's side is the latest verified checkpoint plus the entries after it; `fromScratch=true` " +
          "sums every entry of the project instead (slower: it also proves the checkpoints).",
        params: ProjectParams,
        querystring: Type.Object(
          {
            fromScratch: Type.Optional(Type.Boolean({ default: false })),
            chainId: Type.Optional(
              Type.Integer({
                minimum: 1,
                maximum: 2 ** 31 - 1,
                description: "Answer the top-level fields for this chain's tank instead of the home chain's",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Report }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { chainId } = request.query;
      const fromScratch = request.query.fromScratch === true;
      const report = (
        await services.reads.snapshot((q) => parity(q, [request.params.id], { fromScratch }))
      )[0]!;
      if (chainId === undefined) return report;
      // A chain the project has no tank on has an empty ledger there, and agrees with it.
      const tank = report.chains.find((c) => c.chainId === chainId);
      if (!tank && !services.config.chains.some((c) => c.chainId === chainId)) throw notFound("chain");
      const { chainId: _, ...top } = tank ?? {
        chainId,
        ledgerBalance: "0",
        cachedBalance: "0",
        delta: "0",
        inSync: true,
      };
      return { ...report, ...top };
    },
  );

  app.get(
    "/projects/funds/parity-report",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Parity of every project the caller can see",
        querystring: DriftQuery,
        response: responses({ 200: MultiReport }),
      },
    },
    async (request) => {
      const principal = requirePrincipal(request);
      const ids =
        principal.kind === "apiKey"
          ? keyProjectIds(principal.projectId, principal.scopes)
          : await developerProjectIds(db, principal.developerId);
      return summarise(
        ids.length === 0 ? [] : await services.reads.snapshot((q) => parity(q, ids)),
        request.query.onlyDrift,
      );
    },
  );

  app.get(
    "/orgs/:orgId/funds/parity",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Parity of every project of one organization",
        params: Type.Object({ orgId: Type.String({ maxLength: 64 }) }, { additionalProperties: false }),
        querystring: DriftQuery,
        response: responses({ 200: MultiReport }),
      },
    },
    async (request) => {
      const { orgId } = await authorizeOrg(db, request, request.params.orgId, "org:read");
      const ids = (await db.query<{ id: string }>("SELECT id FROM projects WHERE org_id = $1", [orgId])).map(
        (r) => r.id,
      );
      return summarise(
        ids.length === 0 ? [] : await services.reads.snapshot((q) => parity(q, ids)),
        request.query.onlyDrift,
      );
    },
  );
};

function keyProjectIds(projectId: string, scopes: readonly Scope[]): string[] {
  if (!scopeAllows(scopes, "project:read")) throw forbidden("this API key's scopes do not allow reading");
  return [projectId];
}

async function developerProjectIds(db: Queryable, developerId: number): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    "SELECT p.id FROM projects p JOIN org_members m ON m.org_id = p.org_id WHERE m.developer_id = $1",
    [developerId],
  );
  return rows.map((r) => r.id);
}
