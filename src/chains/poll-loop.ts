/**
 * Runs a watcher's tick on an interval. A failed tick (RPC down, database busy) is retried with
 * exponential backoff up to `maxBackoffMs`; nothing is lost meanwhile because a tick only moves
 * its cursor after it applied its range. Ticks never overlap.
 */
export interface WatcherLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLog: WatcherLog = { debug() {}, info() {}, warn() {}, error() {} };

export interface LoopState {
  running: boolean;
  lastTickAt: number | null;
  lastSuccessAt: number | null;
  /** The message of the last tick's failure, null when the last tick succeeded. */
  lastError: string | null;
  consecutiveFailures: number;
}

export interface PollLoop {
  start(): void;
  stop(): Promise<void>;
  state(): LoopState;
}

export interface PollLoopOptions {
  name: string;
  intervalMs: number;
  maxBackoffMs?: number;
  log?: WatcherLog;
  now?: () => number;
}

export function pollLoop(tick: () => Promise<unknown>, options: PollLoopOptions): PollLoop {
  const log = options.log ?? silentLog;
  const now = options.now ?? Date.now;
  const maxBackoffMs = options.maxBackoffMs ?? Math.max(60_000, options.intervalMs);
  const state: LoopState = {
    running: false,
    lastTickAt: null,
    lastSuccessAt: null,
    lastError: null,
    consecutiveFailures: 0,
  };
  let timer: NodeJS.Timeout | null = null;
  let current: Promise<void> | null = null;

  const delayMs = () =>
    state.consecutiveFailures === 0
      ? options.intervalMs
      : Math.min(maxBackoffMs, options.intervalMs * 2 ** Math.min(state.consecutiveFailures, 16));

  const runOnce = async () => {
    state.lastTickAt = now();
    try {
      await tick();
      state.lastSuccessAt = now();
      state.lastError = null;
      state.consecutiveFailures = 0;
    } catch (err) {
      state.consecutiveFailures++;
      state.lastError = redactUrls((err as Error).message?.split("\n")[0] ?? String(err));
      log.warn(
        { watcher: options.name, failures: state.consecutiveFailures, err: state.lastError },
        "watcher tick failed",
      );
    }
  };

  const schedule = (ms: number) => {
    if (!state.running) return;
    timer = setTimeout(() => {
      current = runOnce().finally(() => {
        current = null;
        schedule(delayMs());
      });
    }, ms);
  };

  return {
    start() {
      if (state.running) return;
      state.running = true;
      schedule(0);
    },
    async stop() {
      state.running = false;
      if (timer) clearTimeout(timer);
      timer = null;
      await current;
    },
    state: () => ({ ...state }),
  };
}

/**
 * Error messages of HTTP clients often carry the URL, and RPC URLs often carry an API key; the
 * message ends up in logs and in /health/ready, so URLs are cut out.
 */
export function redactUrls(message: string): string {
  return message.replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, "[url]");
}
