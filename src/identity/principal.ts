import type { Scope } from "../api-keys/format.ts";

/** Whoever a request speaks for, established once per request by the authentication hook. */
export type Principal =
  | { kind: "developer"; developerId: number; email: string }
  | { kind: "apiKey"; keyId: number; projectId: string; scopes: readonly Scope[]; rateLimit: number };

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal | null;
  }
}
