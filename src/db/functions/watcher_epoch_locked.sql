-- A chain watcher's reorganisation epoch (chains/applied-blocks.ts reorgEpoch: reorganisations
-- recorded plus reconciled), read under the watcher's shared advisory lock, which the function
-- takes first and the caller's transaction keeps. One call where it was two statements, each a
-- round trip of every operation's transaction. The read is a statement of its own inside this
-- VOLATILE function, so under READ COMMITTED it takes its snapshot after the lock is granted and
-- sees a reorganisation committed while it waited (a single statement would not: its snapshot
-- would be the one taken before the wait).
CREATE OR REPLACE FUNCTION watcher_epoch_locked(p_chain integer, p_watcher text) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(p_chain, hashtext(p_watcher));
  RETURN (SELECT count(*) + count(reconciled_at) FROM chain_reorgs WHERE chain_id = p_chain AND watcher = p_watcher);
END $$;
