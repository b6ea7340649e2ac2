-- Settled calls per target without an index on the count (issue 21: the hot UPDATEs HOT-friendly).
-- rollup_project_targets_top held (project, chain, calls DESC, target), so each settlement's
-- update of its target's row changed an indexed column and could not be a HOT update: a new index
-- entry in both indexes for every operation. At 1 million operations in two projects, 999,534
-- updates of 16 rows, none HOT, left 19 bytes per operation in the table and its indexes.
--
-- The overview's top ten needs no such index: a project's targets are the ones its allowlist let
-- through (at most 1,000 entries at a time), read by the primary key's range of the project and
-- chain and sorted in memory.
DROP INDEX rollup_project_targets_top;
