import pg from "pg";

/**
 * A database of its own for each PostgreSQL run: the service migrates it from scratch, repeated
 * runs never meet each other's rows, and a migration history that differs from the code (an
 * edited migration) cannot break the run. Where the role may not create databases, the run falls
 * back to the given database; its ids are fresh per run anyway.
 */
export interface BenchDatabase {
  url: string;
  /** Null when the given database is used as it is. */
  created: string | null;
  drop(): Promise<void>;
}

export async function benchDatabase(givenUrl: string, runId: string): Promise<BenchDatabase> {
  if (process.env.BENCH_FRESH_DB === "0") return { url: givenUrl, created: null, drop: async () => {} };
  const name = `gss_bench_${runId.replace(/[^a-z0-9]/g, "")}`;
  try {
    await withClient(givenUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  } catch (err) {
    console.log(`note: could not create a database (${(err as Error).message}); using the given one`);
    return { url: givenUrl, created: null, drop: async () => {} };
  }
  const url = new URL(givenUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    created: name,
    async drop() {
      await withClient(givenUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
