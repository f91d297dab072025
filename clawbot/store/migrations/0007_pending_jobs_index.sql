-- Start-up recovery looks only for jobs that still need something: queued or running ones,
-- and finished ones whose reply may not have gone out. Those are exactly the jobs with
-- replied = 0 (a job is marked replied only once it is finished), so only they are indexed
-- now: the index holds a handful of entries however many turns were ever answered, and the
-- recovery queries read just those, where the old index made them step through every
-- finished job.
-- A job merged into another has no reply of its own to send (its runner's reply answers
-- it), so a finished one counts as replied and leaves the index.
UPDATE turn_jobs SET replied = 1
    WHERE merged_into IS NOT NULL AND status NOT IN ('queued', 'running');
DROP INDEX turn_jobs_by_status;
CREATE INDEX turn_jobs_pending ON turn_jobs(status, lane) WHERE replied = 0;
