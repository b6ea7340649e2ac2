/**
 * Turns one call per item into one call per batch, per key. A key has at most one call in
 * flight; items that arrive for it meanwhile go in its next call. A call starts on the next turn
 * of the event loop, so requests already read from the network join it even when the previous
 * call answered without yielding (PGlite runs on this thread). `run` answers one result per
 * item, in order; if it throws, every item of that batch is rejected with the error.
 */
export function batchPerKey<K, I, O>(
  run: (key: K, items: I[]) => Promise<O[]>,
  maxBatch = 256,
): (key: K, item: I) => Promise<O> {
  const queues = new Map<K, Waiting<I, O>[]>();
  const busy = new Set<K>();

  function schedule(key: K) {
    if (busy.has(key)) return;
    busy.add(key);
    setImmediate(() => void flush(key));
  }

  async function flush(key: K): Promise<void> {
    const queue = queues.get(key) ?? [];
    const batch = queue.splice(0, maxBatch);
    if (queue.length === 0) queues.delete(key);
    try {
      if (batch.length > 0) {
        const results = await run(
          key,
          batch.map((w) => w.item),
        );
        for (const [i, w] of batch.entries()) w.resolve(results[i]!);
      }
    } catch (err) {
      for (const w of batch) w.reject(err);
    } finally {
      busy.delete(key);
      if (queues.has(key)) schedule(key);
    }
  }

  return (key, item) =>
    new Promise<O>((resolve, reject) => {
      const queue = queues.get(key) ?? [];
      queue.push({ item, resolve, reject });
      queues.set(key, queue);
      schedule(key);
    });
}

interface Waiting<I, O> {
  item: I;
  resolve(result: O): void;
  reject(err: unknown): void;
}
