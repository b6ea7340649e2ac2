/**
 * A project's webhooks through the API: event endpoints (their secret shown once, on creation or
 * rotation), each endpoint's delivery log and redelivery, the approval webhook, and the
 * low-balance alert. Reading needs `project:read`; every change needs `project:update` (admin and
 * owner; never an API key), since an endpoint's secret and the approval webhook are as sensitive
 * as the project's settings.
 */
import { Type } from "@sinclair/typebox";
import { authorizeProject } from "../access/guard.ts";
import type { RoutePlugin } from "../context.ts";
import { ApiError, invalid, notFound } from "../http/problem.ts";
import { bearer, NullableTimestamp, responses, Timestamp, Wei } from "../http/schemas.ts";
import { chainOfView } from "../projects/chains.ts";
import { homeChainOf } from "../projects/store.ts";
import { listDeliveries, redeliver } from "./deliveries.ts";
import { type PrivateTargets, refusedTarget } from "./egress.ts";
import { ALL_EVENTS, EVENT_TYPES, EVENTS } from "./events.ts";
import { generateSecret } from "./signing.ts";
import {
  createEndpoint,
  deleteApproval,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  MAX_ENDPOINTS_PER_PROJECT,
  MAX_EVENTS_PER_REQUEST,
  PREVIOUS_SECRET_GRACE_HOURS,
  putApproval,
  putLowBalanceThreshold,
  readSettings,
  rotateEndpointSecret,
  thresholdOn,
  updateEndpoint,
} from "./store.ts";
import { checkWebhookUrl } from "./url.ts";

const Id = Type.String({ pattern: "^[1-9][0-9]{0,15}$" });
const ProjectParams = Type.Object({ id: Type.String({ maxLength: 200 }) }, { additionalProperties: false });
const EndpointParams = Type.Object(
  { id: Type.String({ maxLength: 200 }), webhookId: Id },
  { additionalProperties: false },
);
const DeliveryParams = Type.Object(
  { id: Type.String({ maxLength: 200 }), webhookId: Id, deliveryId: Id },
  { additionalProperties: false },
);

const EventTypes = Type.Array(Type.Union([...EVENT_TYPES, ALL_EVENTS].map((t) => Type.Literal(t))), {
  minItems: 1,
  maxItems: EVENT_TYPES.length + 1,
  uniqueItems: true,
  description: "Event types; `*` is every type",
});
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: "https (or http) URL the service POSTs to",
});

/** See MAX_EVENTS_PER_REQUEST; 1 is one event per request, each under its own webhook-id. */
const MaxEventsPerRequest = Type.Integer({
  minimum: 1,
  maximum: MAX_EVENTS_PER_REQUEST,
  description:
    'Events sent together in one request at most. 1 (the default): each request is one event, as Standard Webhooks has it. More: each request is a batch, `{"events":[…]}`, of up to this many events that were due together; de-duplicate on each event\'s `id`',
});

const Endpoint = Type.Object(
  {
    id: Type.Integer(),
    url: Type.String(),
    event_types: Type.Array(Type.String()),
    description: Type.String(),
    enabled: Type.Boolean(),
    max_events_per_request: MaxEventsPerRequest,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: "WebhookEndpoint" },
);
const Secret = Type.String({
  description: "Signing secret (whsec_ + base64), shown only in this response: store it now",
});
const CreatedEndpoint = Type.Intersect([Endpoint, Type.Object({ secret: Secret })]);

const Attempt = Type.Object({
  attempt: Type.Integer(),
  started_at: Timestamp,
  latency_ms: Type.Integer(),
  status_code: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  next_attempt_at: NullableTimestamp,
});
const Delivery = Type.Object({
  id: Type.Integer(),
  event_id: Type.String({ description: "The event's id: the webhook-id header, stable across retries" }),
  event_type: Type.String(),
  status: Type.Union([Type.Literal("pending"), Type.Literal("succeeded"), Type.Literal("failed")]),
  attempts: Type.Integer(),
  next_attempt_at: NullableTimestamp,
  last_status_code: Type.Union([Type.Integer(), Type.Null()]),
  last_error: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  completed_at: NullableTimestamp,
  log: Type.Array(Attempt, { description: "The latest attempts, oldest first" }),
});

const FailMode = Type.Union([Type.Literal("open"), Type.Literal("closed")], {
  description:
    "What happens when the receiver errs, times out or answers garbage: open sponsors, closed refuses",
});
const Approval = Type.Object({ url: Type.String(), timeoutMs: Type.Integer(), failMode: FailMode });
/** GET's answer: whether one is set (a page asks on every view; "none" is not an error). */
const ApprovalState = Type.Object({
  configured: Type.Boolean(),
  url: Type.Optional(Type.String()),
  timeoutMs: Type.Optional(Type.Integer()),
  failMode: Type.Optional(FailMode),
});

export const webhookRoutes: RoutePlugin = async (app, { services }) => {
  const { db } = services;
  const tags = ["webhooks"];
  const endpointOr404 = async (projectId: string, webhookId: string) => {
    const endpoint = await getEndpoint(db, projectId, Number(webhookId));
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  };

  // Reference data: what each event type reports and its payload's JSON Schema (the registry in
  // events.ts). The dashboard's subscription form reads its list from here.
  const eventTypes = EVENT_TYPES.map((type) => ({
    type,
    description: EVENTS[type].description,
    payload: EVENTS[type].payload,
  }));
  app.get(
    "/webhooks/event-types",
    {
      schema: {
        tags,
        summary: "The webhook event types, each with its payload's JSON Schema",
        response: responses({
          200: Type.Array(
            Type.Object({
              type: Type.String(),
              description: Type.String(),
              payload: Type.Unknown({ description: "JSON Schema of the event's `data`" }),
            }),
          ),
        }),
      },
    },
    async () => eventTypes,
  );

  app.get(
    "/projects/:id/webhooks",
    {
      schema: {
        tags,
        security: bearer,
        params: ProjectParams,
        response: responses({ 200: Type.Array(Endpoint) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return listEndpoints(db, request.params.id);
    },
  );

  app.post(
    "/projects/:id/webhooks",
    {
      schema: {
        tags,
        security: bearer,
        summary: `Add an event endpoint (at most ${MAX_ENDPOINTS_PER_PROJECT}); its signing secret is in this response only`,
        params: ProjectParams,
        body: Type.Object(
          {
            url: Url,
            eventTypes: EventTypes,
            description: Type.Optional(Type.String({ maxLength: 256 })),
            maxEventsPerRequest: Type.Optional(MaxEventsPerRequest),
          },
          { additionalProperties: false },
        ),
        response: responses({ 201: CreatedEndpoint }),
      },
    },
    async (request, reply) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "project:update");
      const secret = generateSecret();
      const endpoint = await db.transaction((tx) =>
        createEndpoint(tx, services.keyring, {
          projectId,
          url: checkedUrl(request.body.url, services.config.webhookPrivateTargets),
          eventTypes: request.body.eventTypes,
          description: request.body.description ?? "",
          maxEventsPerRequest: request.body.maxEventsPerRequest ?? 1,
          secret,
        }),
      );
      if (!endpoint) {
        throw new ApiError(
          "webhooks_full",
          `a project holds at most ${MAX_ENDPOINTS_PER_PROJECT} webhook endpoints`,
        );
      }
      return reply.code(201).send({ ...endpoint, secret });
    },
  );

  app.get(
    "/projects/:id/webhooks/:webhookId",
    { schema: { tags, security: bearer, params: EndpointParams, response: responses({ 200: Endpoint }) } },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return endpointOr404(request.params.id, request.params.webhookId);
    },
  );

  app.patch(
    "/projects/:id/webhooks/:webhookId",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "Change an endpoint's URL, event types, description, events per request, or pause it (enabled: false)",
        params: EndpointParams,
        body: Type.Object(
          {
            url: Type.Optional(Url),
            eventTypes: Type.Optional(EventTypes),
            description: Type.Optional(Type.String({ maxLength: 256 })),
            enabled: Type.Optional(Type.Boolean()),
            maxEventsPerRequest: Type.Optional(MaxEventsPerRequest),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: responses({ 200: Endpoint }),
      },
    },
    async (request) => {
      const { id, webhookId } = request.params;
      await authorizeProject(db, request, id, "project:update");
      const b = request.body;
      const updated = await updateEndpoint(db, id, Number(webhookId), {
        ...b,
        ...(b.url === undefined ? {} : { url: checkedUrl(b.url, services.config.webhookPrivateTargets) }),
      });
      return updated ?? Promise.reject(notFound("webhook endpoint"));
    },
  );

  app.delete(
    "/projects/:id/webhooks/:webhookId",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Delete an endpoint, its pending deliveries and its delivery log",
        params: EndpointParams,
        response: responses({ 200: Endpoint }),
      },
    },
    async (request) => {
      const { id, webhookId } = request.params;
      await authorizeProject(db, request, id, "project:update");
      const endpoint = await endpointOr404(id, webhookId);
      if (!(await deleteEndpoint(db, id, endpoint.id))) throw notFound("webhook endpoint");
      return endpoint;
    },
  );

  app.post(
    "/projects/:id/webhooks/:webhookId/rotate-secret",
    {
      schema: {
        tags,
        security: bearer,
        summary: `A new signing secret, shown once; the previous one keeps signing beside it for ${PREVIOUS_SECRET_GRACE_HOURS} h`,
        params: EndpointParams,
        response: responses({ 200: Type.Object({ secret: Secret }) }),
      },
    },
    async (request) => {
      const { id, webhookId } = request.params;
      await authorizeProject(db, request, id, "project:update");
      const secret = generateSecret();
      if (!(await rotateEndpointSecret(db, services.keyring, id, Number(webhookId), secret)))
        throw notFound("webhook endpoint");
      return { secret };
    },
  );

  app.get(
    "/projects/:id/webhooks/:webhookId/deliveries",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "The endpoint's deliveries, newest first, each with its attempts (status, latency, error, next attempt)",
        params: EndpointParams,
        querystring: Type.Object(
          {
            limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
            before: Type.Optional(
              Type.Integer({ minimum: 1, description: "Page on: deliveries with a smaller id" }),
            ),
            status: Type.Optional(
              Type.Union([Type.Literal("pending"), Type.Literal("succeeded"), Type.Literal("failed")]),
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Object({
            deliveries: Type.Array(Delivery),
            nextBefore: Type.Union([Type.Integer(), Type.Null()], {
              description: "`before` of the next page; null at the end",
            }),
          }),
        }),
      },
    },
    async (request) => {
      const { id, webhookId } = request.params;
      await authorizeProject(db, request, id, "project:read");
      const endpoint = await endpointOr404(id, webhookId);
      const { limit, before, status } = request.query;
      const deliveries = await listDeliveries(db, endpoint.id, {
        limit,
        beforeId: before ?? null,
        status: status ?? null,
      });
      return { deliveries, nextBefore: deliveries.length === limit ? deliveries.at(-1)!.id : null };
    },
  );

  app.post(
    "/projects/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Deliver the event again now (same event id), with a fresh schedule of attempts",
        params: DeliveryParams,
        response: responses({ 202: Type.Object({ queued: Type.Boolean() }) }),
      },
    },
    async (request, reply) => {
      const { id, webhookId, deliveryId } = request.params;
      await authorizeProject(db, request, id, "project:update");
      if (!(await redeliver(db, id, Number(webhookId), Number(deliveryId)))) throw notFound("delivery");
      return reply.code(202).send({ queued: true });
    },
  );

  approvalRoutes(app, services);
};

type App = Parameters<RoutePlugin>[0];

function approvalRoutes(app: App, services: Parameters<RoutePlugin>[1]["services"]) {
  const { db } = services;
  const tags = ["webhooks"];

  app.get(
    "/projects/:id/approval-webhook",
    {
      schema: { tags, security: bearer, params: ProjectParams, response: responses({ 200: ApprovalState }) },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      const { approval } = await readSettings(db, request.params.id);
      if (!approval) return { configured: false };
      return {
        configured: true,
        url: approval.url,
        timeoutMs: approval.timeoutMs,
        failMode: approval.failMode,
      };
    },
  );

  app.put(
    "/projects/:id/approval-webhook",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "Set the approval webhook, asked before every sponsorship is signed; its secret is in the response that creates (or rotates) it only",
        params: ProjectParams,
        body: Type.Object(
          {
            url: Url,
            timeoutMs: Type.Integer({ minimum: 50, maximum: 5000, default: 2000 }),
            failMode: Type.Union([Type.Literal("open"), Type.Literal("closed")], { default: "closed" }),
            rotateSecret: Type.Optional(
              Type.Boolean({ description: "Replace the secret (the old one stops at once)" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: responses({
          200: Type.Intersect([Approval, Type.Object({ secret: Type.Optional(Secret) })]),
        }),
      },
    },
    async (request) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "project:update");
      const { timeoutMs, failMode } = request.body;
      const approval = {
        url: checkedUrl(request.body.url, services.config.webhookPrivateTargets),
        timeoutMs,
        failMode,
      };
      const { secret } = await db.transaction((tx) =>
        putApproval(
          tx,
          services.keyring,
          projectId,
          approval,
          generateSecret(),
          request.body.rotateSecret === true,
        ),
      );
      services.approvals.forget(projectId);
      return { ...approval, ...(secret ? { secret } : {}) };
    },
  );

  app.delete(
    "/projects/:id/approval-webhook",
    {
      schema: {
        tags,
        security: bearer,
        summary: "Remove the approval webhook: sponsorships are no longer asked about",
        params: ProjectParams,
        response: responses({ 200: Type.Object({ removed: Type.Boolean() }) }),
      },
    },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:update");
      if (!(await deleteApproval(db, request.params.id))) throw notFound("approval webhook");
      services.approvals.forget(request.params.id);
      return { removed: true };
    },
  );

  const Alert = Type.Object({
    thresholdWei: Type.Union([Wei, Type.Null()], {
      description:
        "balance.low is emitted each time a gas tank falls below this (each tank in its chain's smallest unit), " +
        "on every chain without a threshold of its own; null: no alert there",
    }),
    chains: Type.Array(
      Type.Object({
        chainId: Type.Integer(),
        thresholdWei: Type.Union([Wei, Type.Null()], {
          description: "The threshold that applies to this chain's tank",
        }),
        own: Type.Boolean({ description: "Set for this chain (PUT with chainId), not the project's figure" }),
      }),
      { description: "Every chain served here, the home chain first" },
    ),
  });
  /** The thresholds as the API shows them: the project's, and the one each served chain follows. */
  const alertView = async (projectId: string) => {
    const settings = await readSettings(db, projectId);
    const home = await homeChainOf(db, projectId);
    if (home === null) throw notFound("project");
    const served = services.config.chains.map((c) => c.chainId);
    const chains = [home, ...served.filter((id) => id !== home)];
    return {
      thresholdWei: settings.lowBalanceThresholdWei?.toString() ?? null,
      chains: chains.map((chainId) => ({
        chainId,
        thresholdWei: thresholdOn(settings, chainId)?.toString() ?? null,
        own: settings.lowBalanceThresholds.has(chainId),
      })),
    };
  };
  app.get(
    "/projects/:id/balance-alert",
    { schema: { tags, security: bearer, params: ProjectParams, response: responses({ 200: Alert }) } },
    async (request) => {
      await authorizeProject(db, request, request.params.id, "project:read");
      return alertView(request.params.id);
    },
  );
  app.put(
    "/projects/:id/balance-alert",
    {
      schema: {
        tags,
        security: bearer,
        summary:
          "Set the low-balance threshold, the project's or one chain's; setting it above a tank's balance emits balance.low at once",
        description:
          "Without `chainId`, `thresholdWei` is the project's threshold, which every chain without one of its own " +
          "follows. With `chainId` (a chain served here), it is that chain's own, in its currency's smallest unit; " +
          "null there means no alert on that chain.",
        params: ProjectParams,
        body: Type.Object(
          {
            thresholdWei: Type.Union([Wei, Type.Null()]),
            chainId: Type.Optional(Type.Integer({ minimum: 1, maximum: 2 ** 31 - 1 })),
          },
          { additionalProperties: false },
        ),
        response: responses({ 200: Alert }),
      },
    },
    async (request) => {
      const projectId = request.params.id;
      await authorizeProject(db, request, projectId, "project:update");
      const { thresholdWei: raw, chainId } = request.body;
      const threshold = raw === null ? null : BigInt(raw);
      if (threshold === 0n) throw invalid("thresholdWei must be positive; null removes the alert");
      if (chainId !== undefined) await chainOfView(db, services.config.chains, projectId, chainId);
      await db.transaction((tx) => putLowBalanceThreshold(tx, projectId, threshold, chainId));
      return alertView(projectId);
    },
  );
}

function checkedUrl(value: string, privateTargets: PrivateTargets): string {
  const checked = checkWebhookUrl(value);
  if (!checked.ok) throw invalid(checked.reason);
  const refused = refusedTarget(new URL(checked.url), privateTargets);
  if (refused) throw invalid(refused);
  return checked.url;
}
