-- Rules by name (issue 24). A studio's rules read as "Mint on the game contract" and "Launch
-- week budget", not as an address, a selector or a slug; and a rule can be paused and resumed
-- without being deleted and typed in again.
--
-- Names are the studio's own words, shown back as text and never interpreted: bounded, and free
-- of control characters so that a name cannot break a log line or a CSV export.
ALTER TABLE policy_rules
  ADD COLUMN name text CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[[:cntrl:]]'),
  -- A paused rule is kept with its counters and refuses nothing; the reservation skips it.
  ADD COLUMN paused boolean NOT NULL DEFAULT false;

ALTER TABLE allowlist_entries
  ADD COLUMN name text CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[[:cntrl:]]');

ALTER TABLE api_keys
  ADD COLUMN name text CHECK (length(name) BETWEEN 1 AND 128 AND name !~ '[[:cntrl:]]');
