/**
 * SQL for hashes and addresses kept as bytes (migrations 029–031) that cross into TypeScript as
 * lower-case 0x-prefixed hexadecimal, and for the keys some indexes hold instead of the text. An
 * index on an expression is used only by a query that repeats the expression, so every query
 * writes it through these, the same way the migrations wrote the indexes.
 */

/** The bytes of a 0x-prefixed hexadecimal value (a parameter such as `$2`, or a text column). */
export const bytes = (sql: string) => `decode(substr(${sql}, 3), 'hex')`;

/** The bytes of each 0x-prefixed hexadecimal value of a text[] parameter. */
export const bytesArray = (param: string) => `ARRAY(SELECT ${bytes("h")} FROM unnest(${param}::text[]) h)`;

/** A bytea column as 0x-prefixed hexadecimal (NULL stays NULL). */
export const hex = (column: string) => `'0x' || encode(${column}, 'hex')`;

/**
 * The 64-bit key sponsorships' sender and target indexes hold for a project's address (migration
 * 045): the first 64 bits of the MD5 of "project/address". A shared key is possible, so a read
 * compares the project and the address themselves too.
 */
export const projectAddressKey = (project: string, address: string) =>
  `('x' || left(md5(${project} || '/' || ${address}), 16))::bit(64)::bigint`;

/**
 * The 64-bit key of sponsorships' authorization-id index (migration 048): the first 8 bytes of the
 * id, as a bigint, written once, in db/functions/auth_id_key.sql (the planner inlines it, so the
 * index serves the lookup). `id` is the id's bytes (a bytea column, or `bytes("$1")`). Ids are
 * random, and a read compares the whole id as well.
 */
export const authIdKey = (id: string) => `auth_id_key(${id})`;

/**
 * The 64-bit key of ledger_entries' index by project (migration 048): the first 64 bits of the
 * MD5 of the project's id. A shared key is possible: a read that sums or lists compares the project
 * itself too.
 */
export const projectKey = (project: string) => `('x' || left(md5(${project}), 16))::bit(64)::bigint`;

/**
 * A project's rows with an id above `afterId` (and at most `upTo`), as one range of an index on
 * (projectKey, id) (migrations 048 and 049): a row comparison bounded on both sides.
 * - Written as `key = K AND id > X` instead, the planner may take the primary key's range of ids
 *   and compute the key of every row in it: a parity tail of 10,000 entries took 13 ms that way,
 *   against 3 ms through this range.
 * - With the key's equality beside the range, the index is entered at the key's first entry, not
 *   at the range's start, and every entry of the project is compared: at 1 million entries in
 *   two projects, a tail of 10,000 took 35-50 ms against 10-14 ms.
 * - The planner estimates a row comparison from its first column alone (`key > K`, `key <= K`):
 *   with two projects holding most of the entries, about a quarter of the table for a key that
 *   falls between theirs. A report of 22 projects was then costed high enough for JIT
 *   compilation (528 functions, 0.25-3.2 s), which the service's sessions do not use
 *   (db/postgres.ts); executed without it, the same plan takes 12-17 ms.
 */
export const projectIdsAbove = (
  project: string,
  afterId: string,
  columns = { project: "project_id", id: "id" },
  upTo = "9223372036854775807",
) =>
  `(${projectKey(columns.project)}, ${columns.id}) > (${projectKey(project)}, ${afterId})
   AND (${projectKey(columns.project)}, ${columns.id}) <= (${projectKey(project)}, ${upTo})`;
