-- decisions: the approved baseline (package approvals). approval is how
-- the resolved tool's current definition stood in the approved baseline
-- when the call was decided: approved, unapproved (another definition of
-- the tool is approved), rejected (this one was reviewed and refused), new
-- (no definition of the tool was ever approved), or '' (no approvals
-- policy applied: every row written before this migration reads so).
-- baseline_version is the baseline that decided it: the approvals topic's
-- version (the number of approval events applied, the same on every
-- instance), or 'lock:' and a lockfile's SHA-256 prefix (check,
-- reanalyze --approvals-lock), '' when approval is ''. Both are additive:
-- the contract allows them.
ALTER TABLE {db}.decisions
    ADD COLUMN IF NOT EXISTS approval LowCardinality(String) DEFAULT '' AFTER current_digest,
    ADD COLUMN IF NOT EXISTS baseline_version LowCardinality(String) DEFAULT '' AFTER approval;
