-- Database functions now live one per file in src/db/functions/, re-applied by the migrator when a
-- file changes; the migrations before this one keep only their table changes. A store created
-- before this release still holds the signatures that earlier migrations replaced (a store
-- migrated to the end never does): dropped here, so that the current definitions are the only
-- ones a call can resolve to.
DROP FUNCTION IF EXISTS reserve_sponsorship(text, text, text, text, bigint, integer, text, text, text, bigint, numeric, bigint, bigint, text);
DROP FUNCTION IF EXISTS reserve_sponsorships(text, jsonb);
DROP FUNCTION IF EXISTS reserve_sponsorships(text, jsonb, timestamptz);
