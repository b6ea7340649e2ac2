import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, invalid, notFound } from "../http/problem.ts";
import { Address, bearer, ProjectParams, responses, Timestamp, Wei } from "../http/schemas.ts";
import { chainOfView, chainSettingsOf, viewedChain } from "../projects/chains.ts";
import { homeChainOf } from "../projects/store.ts";
import { DAY_MS, daily, decodeCursor, events, isoDay, money, overview, topSenders } from "./store.ts";

const ChainId = Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 });

/** `?chainId=`: which chain's figures a view answers; the project's home chain by default. */
const ChainQuery = {
  chainId: Type.Optional({
    ...ChainId,
    description: "Answer for this chain (one the service serves) instead of the project's home chain",
  }),
};

const Overview = Type.Object({
  chainId: {
    ...ChainId,
    description: "The chain the figures are for: the home chain unless `chainId` was asked",
  },
  totalSponsored: Type.Integer({ description: "Operations settled on chain (success or reverted)" }),
  totalGasSaved: Wei,
  activeUsers: Type.Integer({ description: "Distinct senders with a settled operation in the last 30 days" }),
  today: Type.Object({ sponsored: Type.Integer(), dailyCapRemaining: Wei }),
  topContracts: Type.Array(
    Type.Object({ address: Type.String(), calls: Type.Integer(), gasUsed: Type.String() }),
  ),
  chains: Type.Array(
    Type.Object({
      chainId: ChainId,
      currency: Type.String({ description: "Symbol of the chain's native currency, of totalGasSaved" }),
      totalSponsored: Type.Integer(),
      totalGasSaved: Wei,
    }),
    {
      description: "Settled totals of the home chain and of every other chain the service serves, home first",
    },
  ),
});
const Status = Type.Union(["pending", "success", "reverted", "expired"].map((s) => Type.Literal(s)));
const Event = Type.Object(
  {
    id: Type.Integer(),
    sender: Type.String(),
    target: Type.String(),
    status: Status,
    estimated_gas: Type.Integer(),
    actual_gas: Type.Integer(),
    created_at: Timestamp,
    selector: Type.String(),
    auth_id: Type.String(),
    max_gas_cost: Wei,
    actual_gas_cost: Wei,
    tx_hash: Type.Union([Type.String(), Type.Null()]),
    user_op_hash: Type.Union([Type.String(), Type.Null()]),
    valid_until: Type.Integer({
      description:
        "Unix time in seconds, end of the authorization's validity: a pending event holds max_gas_cost " +
        "reserved until then, and is released (expired) when its operation has not appeared by then",
    }),
    chain_id: Type.Integer({ description: "The chain the operation is for, whose gas tank paid for it" }),
  },
  { $id: "TransactionEvent" },
);

const MAX_DAYS = 366;

const Money = Type.Object(
  {
    chainId: { ...ChainId, description: "The tank's chain: the home chain unless `chainId` was asked" },
    available: {
      ...Wei,
      description: "What the tank can still reserve: open authorizations are already taken out",
    },
    reserved: { ...Wei, description: "Held by open (pending) authorizations until they settle or expire" },
    spentTotal: { ...Wei, description: "Settled cost of every operation so far (success or reverted)" },
    spentToday: { ...Wei, description: "Settled cost of the current UTC day" },
    spentLast7Days: { ...Wei, description: "Settled cost of the last 7 UTC days, today included" },
    averageDailySpend: { ...Wei, description: "spentLast7Days ÷ 7, rounded down to a whole wei" },
    daysOfGasLeft: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
      description:
        "available ÷ averageDailySpend, rounded down to a tenth of a day; null when nothing was spent in " +
        "the last 7 days",
    }),
    last7Days: Type.Array(Type.Object({ day: Type.String({ format: "date" }), spent: Wei }), {
      description: "Settled cost per UTC day, oldest first, today last",
    }),
  },
  { $id: "MoneyView" },
);

export const analyticsRoutes: RoutePlugin = async (app, { services }) => {
  // Who may read is checked on the primary (`db`); what is read may come from a replica (`reads`).
  const { db, reads } = services;
  const tags = ["analytics"];

  app.get(
    "/projects/:id/analytics/overview",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        querystring: Type.Object(ChainQuery, { additionalProperties: false }),
        response: responses({ 200: Overview }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { chains } = services.config;
      const home = await homeChainOf(db, request.params.id);
      if (home === null) throw notFound("project");
      const chainId = viewedChain(chains, home, request.query.chainId);
      const figures = await overview(reads, request.params.id, chainId, services.now());
      const totals = new Map(figures.chains.map((c) => [c.chainId, c]));
      const shown = [home, ...chains.map((c) => c.chainId).filter((id) => id !== home)];
      return {
        ...figures,
        chains: shown.map((id) => ({
          chainId: id,
          currency: chainSettingsOf(chains, id).nativeCurrency.symbol,
          totalSponsored: totals.get(id)?.totalSponsored ?? 0,
          totalGasSaved: totals.get(id)?.totalGasSaved ?? "0",
        })),
      };
    },
  );

  app.get(
    "/projects/:id/analytics/money",
    {
      schema: {
        tags,
        security: bearer,
        summary: "The gas tank in plain words: available, reserved, spent, and days of gas left",
        description:
          "One chain's tank, in that chain's currency: the home chain's unless `chainId` is given.",
        params: ProjectParams,
        querystring: Type.Object(ChainQuery, { additionalProperties: false }),
        response: responses({ 200: Money }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const chainId = await chainOfView(db, services.config.chains, request.params.id, request.query.chainId);
      const view = await money(reads, request.params.id, chainId, services.now());
      if (!view) throw notFound("project");
      return { chainId, ...view };
    },
  );

  app.get(
    "/projects/:id/analytics/daily",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Per-day figures of the project, one row per UTC day, from the rollups",
        description:
          "`from` and `to` are UTC days (YYYY-MM-DD), both included, at most 366 days apart; by default the " +
          "last 30 days, today included. Days without activity are rows of zeros. `authorized` counts " +
          "authorizations by the day they were made; `sponsored` (success + reverted), `expired`, `gasUsed` and " +
          "`costWei` count operations by the day they settled or expired; `activeSenders` is the number of " +
          "distinct senders with an operation settled that day. All on one chain: the home chain unless " +
          "`chainId` is given.",
        params: ProjectParams,
        querystring: DailyQuery,
        response: responses({
          200: Type.Object({
            chainId: { ...ChainId, description: "The chain the figures are for" },
            days: Type.Array(
              Type.Object({
                day: Type.String({ format: "date" }),
                authorized: Type.Integer(),
                sponsored: Type.Integer({ description: "Operations settled on chain (success or reverted)" }),
                success: Type.Integer(),
                reverted: Type.Integer(),
                expired: Type.Integer(),
                gasUsed: Type.String({ pattern: "^[0-9]+$" }),
                costWei: Wei,
                activeSenders: Type.Integer({
                  description: "Distinct senders with an operation settled that day",
                }),
              }),
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { from, to } = dayRange(request.query, services.now());
      const chainId = await chainOfView(db, services.config.chains, request.params.id, request.query.chainId);
      return { chainId, days: await daily(reads, request.params.id, chainId, from, to) };
    },
  );

  app.get(
    "/projects/:id/analytics/senders",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Top senders by settled operations or by their actual cost, on one chain",
        params: ProjectParams,
        querystring: Type.Object(
          {
            by: Type.Union([Type.Literal("operations"), Type.Literal("cost")], { default: "operations" }),
            limit: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
            ...ChainQuery,
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Object({
            chainId: { ...ChainId, description: "The chain the figures are for" },
            senders: Type.Array(
              Type.Object({
                sender: Type.String(),
                operations: Type.Integer({
                  description: "Operations settled on chain (success or reverted)",
                }),
                costWei: Wei,
                pending: Type.Integer({ description: "Authorizations not yet settled or released" }),
              }),
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { by, limit } = request.query;
      const chainId = await chainOfView(db, services.config.chains, request.params.id, request.query.chainId);
      return { chainId, senders: await topSenders(reads, request.params.id, chainId, by, limit) };
    },
  );

  app.get(
    "/projects/:id/analytics/events",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Sponsorship events, newest first, by offset or by cursor, optionally filtered",
        description:
          "Pages by `offset` (at most 1,000,000, read through an index of ids) or by `cursor`: each page that " +
          "has more after it carries `nextCursor`; pass it back as `cursor` (with the same filters) for the next " +
          "page, which costs the same at any depth. `total` counts every event of the project, or those with the " +
          "`status` filter; with a `sender`, `target` or time filter it counts matches up to 10,000 and then " +
          "answers 10,000 with `totalCapped: true`. `from` is inclusive, `to` exclusive, on `created_at`.",
        params: ProjectParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
            offset: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 }),
            cursor: Type.Optional(
              Type.String({
                maxLength: 64,
                description: "`nextCursor` of the previous page; not with offset",
              }),
            ),
            status: Type.Optional(Status),
            sender: Type.Optional(Address),
            target: Type.Optional(Address),
            chainId: Type.Optional({
              ...ChainId,
              description: "One chain's events alone (default: every chain's)",
            }),
            from: Type.Optional(Type.String({ format: "date-time", description: "created_at at or after" })),
            to: Type.Optional(Type.String({ format: "date-time", description: "created_at before" })),
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Object({
            events: Type.Array(Event),
            total: Type.Integer(),
            totalCapped: Type.Optional(
              Type.Literal(true, { description: "Present when a filtered total stopped counting at 10,000" }),
            ),
            nextCursor: Type.Optional(
              Type.String({ description: "Present when more events follow: the `cursor` of the next page" }),
            ),
          }),
        }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { limit, offset, cursor, status, sender, target, chainId, from, to } = request.query;
      let afterId: number | null = null;
      if (cursor !== undefined) {
        if (offset > 0) throw new ApiError("invalid_cursor", "send either a cursor or an offset, not both");
        afterId = decodeCursor(cursor);
        if (afterId === null)
          throw new ApiError("invalid_cursor", "the cursor is not one this service issued");
      }
      const { fromMs, toMs } = instantRange(from, to);
      const filters = {
        status,
        sender: sender?.toLowerCase(),
        target: target?.toLowerCase(),
        chainId,
        fromMs,
        toMs,
      };
      return events(reads, request.params.id, { limit, offset, afterId, filters });
    },
  );
};

/** The query of a daily view: `from` and `to` UTC days (read by dayRange). */
export const DayRangeQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ format: "date", description: "First UTC day, included" })),
    to: Type.Optional(Type.String({ format: "date", description: "Last UTC day, included" })),
  },
  { additionalProperties: false },
);

const DailyQuery = Type.Object(
  { ...DayRangeQuery.properties, ...ChainQuery },
  { additionalProperties: false },
);

/**
 * The UTC days of a daily view's `from` and `to` (YYYY-MM-DD, both included): by default the last
 * 30 days, today included; at most MAX_DAYS apart. Shared by the daily figures and the refusal counts.
 */
export function dayRange(query: { from?: string; to?: string }, nowMs: number): { from: string; to: string } {
  const today = Math.floor(nowMs / DAY_MS);
  const to = query.to === undefined ? today : Date.parse(query.to) / DAY_MS;
  const from = query.from === undefined ? to - 29 : Date.parse(query.from) / DAY_MS;
  if (from > to) throw invalid("`from` must not be after `to`");
  if (to - from >= MAX_DAYS) throw invalid(`at most ${MAX_DAYS} days at a time`);
  return { from: isoDay(from), to: isoDay(to) };
}

/**
 * A time filter's `from` (inclusive) and `to` (exclusive) date-times as instants. Shared by the
 * events and the refusal log.
 */
export function instantRange(from?: string, to?: string): { fromMs?: number; toMs?: number } {
  const fromMs = from === undefined ? undefined : Date.parse(from);
  const toMs = to === undefined ? undefined : Date.parse(to);
  // A date-time the format admits but no clock has (a leap second) is not an instant.
  if (Number.isNaN(fromMs) || Number.isNaN(toMs)) throw invalid("`from` and `to` must be instants");
  if (fromMs !== undefined && toMs !== undefined && fromMs >= toMs)
    throw invalid("`from` must be before `to`");
  return { ...(fromMs === undefined ? {} : { fromMs }), ...(toMs === undefined ? {} : { toMs }) };
}
