import { Type } from "@sinclair/typebox";
import { authorizeOrg } from "../access/guard.ts";
import { ROLES, type Role } from "../access/roles.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, conflict, invalid, notFound } from "../http/problem.ts";
import { bearer, responses, Timestamp } from "../http/schemas.ts";
import { requireDeveloper } from "../identity/authenticate.ts";
import { developerByEmail, lockDeveloper } from "../identity/developers.ts";
import { normalizeEmail } from "../identity/email.ts";
import { decideMemberUpsert } from "./policy.ts";
import {
  countOrgsCreatedBy,
  countOwners,
  getMember,
  insertOrg,
  listMembers,
  listOrgsOf,
  lockOrg,
  upsertMember,
} from "./store.ts";

const RoleSchema = Type.Union(
  ROLES.map((r) => Type.Literal(r)),
  { description: "owner > admin > developer > viewer" },
);
const Org = Type.Object(
  { id: Type.Integer(), name: Type.String(), slug: Type.String(), role: RoleSchema, created_at: Timestamp },
  { $id: "Organization" },
);
const Member = Type.Object(
  { developer_id: Type.Integer(), email: Type.String(), role: RoleSchema, created_at: Timestamp },
  { $id: "Member" },
);
const OrgParams = Type.Object({ orgId: Type.String({ maxLength: 64 }) }, { additionalProperties: false });
const MemberParams = Type.Object(
  { orgId: Type.String({ maxLength: 64 }), developerId: Type.String({ pattern: "^[1-9][0-9]{0,15}$" }) },
  { additionalProperties: false },
);
const Email = Type.String({ pattern: "^[^\\s@]{1,64}@[^\\s@]{1,189}$", maxLength: 254 });

export const orgRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["organizations"];

  app.post(
    "/orgs",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Create an organization; the caller becomes its owner",
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 128 }),
            slug: Type.String({ pattern: "^[a-z0-9-]{3,48}$" }),
          },
          { additionalProperties: false },
        ),
        response: responses({ 201: Org }),
      },
    },
    async (request, reply) => {
      const { developerId } = requireDeveloper(request);
      const max = services.config.maxOrgsPerDeveloper;
      // Counted under a lock on the developer's record: concurrent creations queue, so the
      // quota holds exactly.
      const org = await db.transaction(async (tx) => {
        await lockDeveloper(tx, developerId);
        if ((await countOrgsCreatedBy(tx, developerId)) >= max) return "quota" as const;
        return insertOrg(tx, { ...request.body, ownerId: developerId });
      });
      if (org === "quota") {
        throw new ApiError("quota_exceeded", `a developer may create at most ${max} organizations`);
      }
      if (!org) throw conflict(`the slug '${request.body.slug}' is taken`);
      return reply.code(201).send(org);
    },
  );

  app.get(
    "/orgs",
    {
      schema: {
        tags,
        security: bearer,
        summary: "The caller's organizations, each with the caller's role",
        response: responses({ 200: Type.Array(Org) }),
      },
    },
    async (request) => listOrgsOf(db, requireDeveloper(request).developerId),
  );

  app.get(
    "/orgs/:orgId/members",
    {
      schema: { tags, security: bearer, params: OrgParams, response: responses({ 200: Type.Array(Member) }) },
    },
    async (request) => {
      const { orgId } = await authorizeOrg(db, request, request.params.orgId, "org:read");
      return listMembers(db, orgId);
    },
  );

  app.post(
    "/orgs/:orgId/members",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "Add a member by email (admin or owner); changing an existing member's role is for owners only",
        params: OrgParams,
        body: Type.Object({ email: Email, role: RoleSchema }, { additionalProperties: false }),
        response: responses({ 200: Member, 201: Member }),
      },
    },
    async (request, reply) => {
      const access = await authorizeOrg(db, request, request.params.orgId, "members:write");
      const { role } = request.body;
      const email = normalizeEmail(request.body.email);
      if (email === null) {
        throw invalid(
          "body/email must be a printable-ASCII address outside the reserved .invalid domain " +
            "(write an internationalised domain in punycode)",
        );
      }
      const result = await db.transaction(async (tx) => {
        await lockOrg(tx, access.orgId);
        const developerId = await developerByEmail(tx, email);
        const current = await getMember(tx, access.orgId, developerId);
        await applyRole(tx, access, developerId, current?.role ?? null, role);
        return { created: current === null, member: (await getMember(tx, access.orgId, developerId))! };
      });
      return reply.code(result.created ? 201 : 200).send(result.member);
    },
  );

  app.patch(
    "/orgs/:orgId/members/:developerId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Change a member's role (owner only)",
        params: MemberParams,
        body: Type.Object({ role: RoleSchema }, { additionalProperties: false }),
        response: responses({ 200: Member }),
      },
    },
    async (request) => {
      const access = await authorizeOrg(db, request, request.params.orgId, "members:role");
      const developerId = Number(request.params.developerId);
      return db.transaction(async (tx) => {
        await lockOrg(tx, access.orgId);
        const current = await getMember(tx, access.orgId, developerId);
        if (!current) throw notFound("member");
        await applyRole(tx, access, developerId, current.role, request.body.role);
        return (await getMember(tx, access.orgId, developerId))!;
      });
    },
  );
};

async function applyRole(
  tx: Parameters<typeof upsertMember>[0],
  access: { orgId: number; role: Role },
  developerId: number,
  currentRole: Role | null,
  newRole: Role,
) {
  const decision = decideMemberUpsert({
    actorRole: access.role,
    currentRole,
    newRole,
    ownerCount: await countOwners(tx, access.orgId),
  });
  if (decision.kind === "deny") {
    throw new ApiError(decision.code, decision.detail);
  }
  await upsertMember(tx, access.orgId, developerId, newRole);
}
