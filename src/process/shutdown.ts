import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { EXIT_FAILURE, firstLine } from "./startup.ts";

/**
 * Graceful shutdown on SIGTERM and SIGINT, within a bound. The steps run in order (the HTTP
 * drain, then what the requests needed, then the store); a step that fails is logged and the
 * others still run. All done: exit 0. A failed step: exit 1. Still running when the bound
 * (SHUTDOWN_TIMEOUT_MS) is hit: exit 1, naming the step. A second signal changes nothing: the
 * bound already guarantees the end (and in cluster mode a terminal's Ctrl-C reaches a worker
 * twice, once from the terminal and once forwarded by the primary).
 *
 * A signal that arrives during start-up is held until start-up is done (`ready()`), then acted
 * on: the steps that close what start-up opened are registered by then.
 */
export interface ShutdownStep {
  name: string;
  run(): Promise<void>;
}

export interface Shutdown {
  /** Adds a step; steps run in the order they were added. */
  add(step: ShutdownStep): void;
  /** Start-up is over: a signal held meanwhile is acted on now. */
  ready(): void;
  /** Starts shutting down (as a signal does); resolves never: the process exits. */
  begin(reason: string): Promise<never>;
  readonly started: boolean;
}

export interface ShutdownOptions {
  log: Logger;
  timeoutMs: number;
  /** Ends the process (process.exit by default; the server's waits for its log, process/log.ts). */
  exit?: (code: number) => void;
  signals?: NodeJS.Signals[];
}

export function installShutdown({
  log,
  timeoutMs,
  exit = (code) => process.exit(code),
  signals = ["SIGTERM", "SIGINT"],
}: ShutdownOptions): Shutdown {
  const steps: ShutdownStep[] = [];
  let isReady = false;
  let held: string | null = null;
  let started = false;

  const begin = async (reason: string): Promise<never> => {
    if (started) return new Promise<never>(() => {});
    started = true;
    const t0 = Date.now();
    let current = "start";
    log.info({ reason, timeoutMs }, "shutting down");
    const bound = setTimeout(() => {
      log.error(
        { step: current, timeoutMs },
        `shutdown did not finish within ${timeoutMs} ms (SHUTDOWN_TIMEOUT_MS), stuck at ${current}: exiting`,
      );
      exit(EXIT_FAILURE);
    }, timeoutMs);
    let failed = false;
    for (const step of steps) {
      current = step.name;
      try {
        await step.run();
      } catch (err) {
        failed = true;
        log.error({ step: step.name, err: firstLine(err) }, "shutdown step failed");
      }
    }
    clearTimeout(bound);
    log.info({ ms: Date.now() - t0, clean: !failed }, "stopped");
    exit(failed ? EXIT_FAILURE : 0);
    // The exit may wait for the log's writes (exitAfterLog): nothing after it resolves.
    return new Promise<never>(() => {});
  };

  const onSignal = (signal: NodeJS.Signals) => {
    if (started) {
      log.info({ signal }, "already shutting down");
      return;
    }
    if (!isReady) {
      held ??= signal;
      return;
    }
    void begin(signal);
  };
  for (const signal of signals) process.on(signal, onSignal);

  return {
    add: (step) => void steps.push(step),
    ready() {
      isReady = true;
      if (held) void begin(held);
    },
    begin,
    get started() {
      return started;
    },
  };
}

/**
 * The HTTP step: stop accepting connections, let every request already received finish, then
 * resolve. Fastify answers requests that arrive on open keep-alive connections meanwhile with 503
 * and `Connection: close`; responses to requests in flight carry `Connection: close` too (so
 * clients reconnect elsewhere instead of waiting on a closed instance), and connections that go
 * idle are closed as they do, rather than after the keep-alive timeout.
 */
export function httpDrain(app: FastifyInstance): { step: ShutdownStep } {
  let draining = false;
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (draining) reply.header("connection", "close");
    done(null, payload);
  });
  return {
    step: {
      name: "http",
      async run() {
        draining = true;
        const sweep = setInterval(() => app.server.closeIdleConnections?.(), 50);
        try {
          await app.close();
        } finally {
          clearInterval(sweep);
        }
      },
    },
  };
}
