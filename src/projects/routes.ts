import { Type } from "@sinclair/typebox";
import { formatUnits } from "viem";
import { authorizeOrg, authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, conflict, invalid, notFound } from "../http/problem.ts";
import { bearer, ProjectId, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { requirePrincipal } from "../identity/authenticate.ts";
import { lockOrg } from "../orgs/store.ts";
import { forgetSponsorTerms } from "../sponsor/deps.ts";
import { chainSettingsOf, viewedChain } from "./chains.ts";
import {
  countProjectsOf,
  getProject,
  insertProject,
  listProjects,
  projectTanks,
  updateProject,
} from "./store.ts";

const ProjectListItem = Type.Object({
  id: Type.String(),
  name: Type.String(),
  deposit_address: Type.String(),
  gas_tank_balance: Wei,
  created_at: Timestamp,
});

const UnknownAccountsSchema = Type.Union([Type.Literal("refuse"), Type.Literal("caps_only")], {
  description:
    "Senders whose code is not a known account implementation: `refuse` (default) answers 403 account_not_supported; `caps_only` sponsors them with no code bound, so only the authorization's cost ceilings (estimatedGas, fee ceilings, the caps and policies) bound them and the allowlist binds only the callData's selector, not what the account really calls",
});

const ChainBalance = Type.Object({
  chainId: Type.Integer(),
  balance: Wei,
  balanceFormatted: Type.String({ description: "Exact decimal amount in the chain's native currency" }),
  currency: Type.String(),
});

const Project = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    owner: Type.String({ description: "Owner identifier as sent on creation (organization id or slug)" }),
    organization_id: Type.Integer(),
    deposit_address: Type.String({ description: "Funding address on the project's home chain" }),
    gas_tank_balance: Wei,
    home_chain_id: Type.Integer({
      description:
        "The chain whose tank gas_tank_balance is (14601 for projects made before chains had tanks of their own)",
    }),
    daily_cap: Type.Union([Wei, Type.Null()]),
    validity_ttl_sec: Type.Integer(),
    sponsor_icon: Type.Union([Type.String(), Type.Null()], {
      description: "Icon shown to wallets as the sponsor (ERC-7677 `sponsor.icon`)",
    }),
    unknown_accounts: UnknownAccountsSchema,
    created_at: Timestamp,
    chains: Type.Optional(
      Type.Array(ChainBalance, {
        description: "GET /projects/:id: the project's tank on every chain served here, the home chain first",
      }),
    ),
  },
  { $id: "Project" },
);

const Balance = Type.Object({
  balance: Wei,
  balanceFormatted: Type.String({ description: "Exact decimal amount in the native token" }),
  currency: Type.String(),
  chainId: Type.Integer({
    description: "The chain whose tank the top-level fields describe: the home chain, or `?chainId=`",
  }),
  chains: Type.Array(ChainBalance, {
    description: "The project's tank on every chain served here, the home chain first; each its own money",
  }),
});

const OwnerRef = Type.String({ minLength: 1, maxLength: 64, description: "Organization id or slug" });

export const projectRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["projects"];

  /**
   * The project's tank on its home chain (shown even when no longer served, in the first served
   * chain's currency, as before chains had tanks), then on every other chain served here.
   */
  const tanksOf = async (projectId: string, home: number) => {
    const { chains } = services.config;
    const held = new Map((await projectTanks(db, projectId)).map((t) => [t.chainId, t.balanceWei]));
    return [chainSettingsOf(chains, home), ...chains.filter((c) => c.chainId !== home)].map((c) => {
      const balance = held.get(c.chainId) ?? 0n;
      return {
        chainId: c.chainId,
        balance: balance.toString(),
        balanceFormatted: formatUnits(balance, c.nativeCurrency.decimals),
        currency: c.nativeCurrency.symbol,
      };
    });
  };

  app.post(
    "/projects",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Create a project in an organization where the caller is admin or owner",
        description:
          "`homeChainId` (default: the first chain the service serves) is the chain whose tank `gas_tank_balance` " +
          "and `deposit_address` describe, and the chain analytics and new allowlist entries take when none is " +
          "named. It is chosen once, here: every chain served keeps its own tank whatever the home chain.",
        body: Type.Object(
          {
            id: ProjectId,
            name: Type.String({ minLength: 1, maxLength: 128 }),
            owner: OwnerRef,
            homeChainId: Type.Optional(Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 })),
          },
          { additionalProperties: false },
        ),
        response: responses({ 201: Project }),
      },
    },
    async (request, reply) => {
      const { id, name, owner } = request.body;
      const homeChainId = request.body.homeChainId ?? services.config.chains[0]!.chainId;
      if (!services.config.chains.some((c) => c.chainId === homeChainId)) {
        throw invalid(
          `homeChainId ${homeChainId} is not a chain this service serves (GET /blockchain/chains)`,
        );
      }
      const org = await authorizeOrg(db, request, owner, "projects:create");
      const max = services.config.maxProjectsPerOrg;
      // Counted under the organization's lock: concurrent creations queue, so the quota holds
      // exactly (each project costs a derivation index and a deposit address to watch).
      const project = await db.transaction(async (tx) => {
        await lockOrg(tx, org.orgId);
        if ((await countProjectsOf(tx, org.orgId)) >= max) return "quota" as const;
        return insertProject(tx, services.deposits, {
          id,
          name,
          owner,
          orgId: org.orgId,
          homeChainId,
        });
      });
      if (project === "quota") {
        throw new ApiError("quota_exceeded", `an organization may hold at most ${max} projects`);
      }
      if (!project) throw conflict(`project id '${id}' is taken`);
      return reply.code(201).send(project);
    },
  );

  app.get(
    "/projects",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Projects of the caller's organizations (or the API key's own project)",
        response: responses({ 200: Type.Array(ProjectListItem) }),
      },
    },
    async (request) => {
      const principal = requirePrincipal(request);
      if (principal.kind === "developer") return listProjects(db, { developerId: principal.developerId });
      // The list shows every field GET /projects/:id shows: the same door, the same 403.
      await authorizeProject(db, request, principal.projectId, "project:read");
      return listProjects(db, { projectId: principal.projectId });
    },
  );

  app.get(
    "/projects/:id",
    { schema: { tags, security: bearer, params: ProjectParams, response: responses({ 200: Project }) } },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const project = await getProject(db, request.params.id);
      if (!project) throw notFound("project");
      return { ...project, chains: await tanksOf(project.id, project.home_chain_id) };
    },
  );

  app.patch(
    "/projects/:id",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "Change a project's name, daily cap (wei, null for none), validity TTL, sponsor icon or unknown-account setting (admin or owner)",
        params: ProjectParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
            dailyCap: Type.Optional(Type.Union([Wei, Type.Null()])),
            validityTtlSec: Type.Optional(Type.Integer({ minimum: 30, maximum: 3600 })),
            sponsorIcon: Type.Optional(
              Type.Union([
                Type.String({
                  maxLength: 4096,
                  pattern: "^(https://[!-~]+|data:image/(png|jpeg|webp|svg\\+xml);base64,[A-Za-z0-9+/=]+)$",
                  description: "A https URL or a data:image URI (base64); null removes it",
                }),
                Type.Null(),
              ]),
            ),
            unknownAccounts: Type.Optional(UnknownAccountsSchema),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: responses({ 200: Project }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:update");
      const { name, dailyCap, validityTtlSec, sponsorIcon, unknownAccounts } = request.body;
      const updated = await updateProject(db, request.params.id, {
        name,
        dailyCapWei: dailyCap === undefined ? undefined : dailyCap === null ? null : BigInt(dailyCap),
        validityTtlSec,
        sponsorIcon,
        unknownAccounts,
      });
      // This instance sponsors with the new settings from the next request; others within
      // the cache's lifetime (sponsor/deps.ts).
      forgetSponsorTerms(services, request.params.id);
      return updated ?? Promise.reject(notFound("project"));
    },
  );

  app.get(
    "/projects/:id/balance",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        querystring: Type.Object(
          {
            chainId: Type.Optional(
              Type.Integer({
                minimum: 1,
                maximum: 2 ** 31 - 1,
                description: "Answer for this chain's tank instead of the home chain's",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Balance }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const project = await getProject(db, request.params.id);
      if (!project) throw notFound("project");
      const home = project.home_chain_id;
      const chainId = viewedChain(services.config.chains, home, request.query.chainId);
      const shown = await tanksOf(project.id, home);
      const { chainId: _, ...top } = shown.find((c) => c.chainId === chainId)!;
      return { ...top, chainId, chains: shown };
    },
  );
};
