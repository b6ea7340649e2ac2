-- The key of sponsorships' index by authorization id (migration 048, sponsorships_by_auth_key):
-- the id's first 8 bytes as a bigint. Ids are random, and a read compares the whole id as well.
--
-- The one place this key is written outside the index itself: the SQL functions that find a
-- sponsorship by its id call it, and so does the TypeScript (db/bytes.ts authIdKey). A SQL
-- function of one expression, IMMUTABLE, is inlined by the planner, so a lookup through it matches
-- the index's expression and uses the index (test/db-functions.test.ts reads the plans).
CREATE OR REPLACE FUNCTION auth_id_key(p_id bytea) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT ('x' || encode(substr(p_id, 1, 8), 'hex'))::bit(64)::bigint $$;
