-- Start-up recovery looks only for jobs that still need something: those with replied = 0
-- (see SQLite's 0007). A finished job merged into another counts as replied.
UPDATE turn_jobs SET replied = 1
    WHERE merged_into IS NOT NULL AND status NOT IN ('queued', 'running');
DROP INDEX turn_jobs_by_status;
CREATE INDEX turn_jobs_pending ON turn_jobs(status, lane) WHERE replied = 0;
