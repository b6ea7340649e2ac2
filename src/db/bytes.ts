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
