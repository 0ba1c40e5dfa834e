-- two statements; the comment's semicolon is ignored;
CREATE TABLE IF NOT EXISTS {db}.b (x UInt8) ENGINE = MergeTree ORDER BY x;

CREATE TABLE IF NOT EXISTS {db}.c (x UInt8)
ENGINE = MergeTree
-- inside a statement;
ORDER BY x
