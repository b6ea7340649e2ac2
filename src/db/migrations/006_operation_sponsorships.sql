-- Whole-operation authorizations (ERC-7677, DESIGN.md §1a): the service sees the operation and
-- every call it makes, so an authorization records its mode and all of its calls, and the
-- reservation checks that every call is allowlisted (naming the first that is not).
ALTER TABLE sponsorships ADD COLUMN mode text NOT NULL DEFAULT 'call' CHECK (mode IN ('call', 'operation'));
-- [{target, selector}] for a whole-operation authorization; NULL for a call authorization, whose
-- one call is (target, selector).
ALTER TABLE sponsorships ADD COLUMN calls jsonb;

-- ERC-7677's `sponsor: {name, icon}`: the project's name and this icon (a URL or a data URI).
ALTER TABLE projects ADD COLUMN sponsor_icon text CHECK (length(sponsor_icon) <= 4096);
