-- A date range of a project's events reads only its own rows (issue 24).
--
-- The events' from/to filters had no index on the project's time: a range read the project's
-- ids from the newest down to the range, and its capped total counted the same way (at 950,000
-- operations, one day 60 days back took 0.97-1.4 s and `from=` yesterday 1.6-2.5 s). The
-- project's day rollup now keeps the smallest and largest sponsorship id created that day, so a
-- range becomes an id range on sponsorships_by_project (project_id, id DESC), read from its top,
-- with the exact time filter applied inside it. Ids are allotted in insertion order and
-- created_at is the reserving instance's clock, so one day's ids may overlap the next day's by
-- a few; each day's bounds cover all of its rows, and the filter on created_at keeps only the
-- range's. Kept by rollup_sponsorships_insert (db/functions); never narrowed by a delete.
ALTER TABLE rollup_project_days
  ADD COLUMN first_id bigint,
  ADD COLUMN last_id bigint;

-- BEGIN BACKFILL
INSERT INTO rollup_project_days AS t (project_id, day, first_id, last_id)
  SELECT project_id, (created_at AT TIME ZONE 'UTC')::date, min(id), max(id)
  FROM sponsorships GROUP BY 1, 2
ON CONFLICT (project_id, day) DO UPDATE SET first_id = EXCLUDED.first_id, last_id = EXCLUDED.last_id;
-- END BACKFILL
