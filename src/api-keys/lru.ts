import assert from "node:assert/strict";

/**
 * A bounded map that forgets its least recently used entry when full (a Map keeps insertion
 * order, so re-inserting an entry on use makes the first one the oldest). Small on purpose: the
 * key resolver keeps two of them, so that one kind of entry can never push out the other.
 */
export class Lru<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(readonly capacity: number) {
    assert.ok(Number.isInteger(capacity) && capacity > 0, "an LRU holds at least one entry");
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value, marked as just used; undefined when absent. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.capacity) {
      this.#entries.delete(this.#entries.keys().next().value as K);
    }
  }

  delete(key: K): boolean {
    return this.#entries.delete(key);
  }

  entries(): IterableIterator<[K, V]> {
    return this.#entries.entries();
  }
}
