/**
 * Turns one call per item into one call per batch, per key. A key has at most one call in
 * flight; items that arrive for it meanwhile go in its next call, which starts as soon as the
 * call in flight answers, before that call's items are answered. A key with nothing waiting
 * starts its call on the next turn of the event loop, so requests already read from the network
 * join it even when the previous call answered without yielding (PGlite runs on this thread).
 * `run` answers one result per item, in order; if it throws, every item of that batch is rejected
 * with the error.
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
    let results: O[] = [];
    let failed = false;
    let failure: unknown;
    try {
      if (batch.length > 0) {
        results = await run(
          key,
          batch.map((w) => w.item),
        );
      }
    } catch (err) {
      failed = true;
      failure = err;
    }
    // The next call goes out before this batch's callers resume. Their continuations run before
    // any timer or I/O callback (a reservation's caller signs its response there, some 100 us
    // each), so a call scheduled after them would leave the database idle for as long as a batch
    // takes to answer: under the bench that gap was as long as the call itself.
    if (queues.has(key)) void flush(key);
    else busy.delete(key);
    if (failed) for (const w of batch) w.reject(failure);
    else for (const [i, w] of batch.entries()) w.resolve(results[i]!);
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
