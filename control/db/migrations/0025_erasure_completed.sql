-- One vocabulary for finished jobs: an erasure job ends `completed`, as a bulk delivery-retry job does
-- (0010), not `done`. Rows already finished are renamed in the same transaction as the constraint.
ALTER TABLE erasure_jobs DROP CONSTRAINT erasure_jobs_state_check;
UPDATE erasure_jobs SET state = 'completed' WHERE state = 'done';
ALTER TABLE erasure_jobs ADD CONSTRAINT erasure_jobs_state_check
    CHECK (state IN ('pending', 'running', 'completed', 'failed'));
