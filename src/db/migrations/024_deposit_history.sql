-- The deposit history (GET /projects/:id/deposits) pages a project's deposit entries newest
-- first. Deposits are a handful among a busy project's reservations and settlements, so they get
-- an index of their own: a page reads its rows and no others.
CREATE INDEX ledger_entries_deposits_by_project ON ledger_entries (project_id, id DESC) WHERE kind = 'deposit';
